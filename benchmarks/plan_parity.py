"""Planner parity on the MLA line (Kimi-K3, GLM-5, DeepSeek) and the state-kernel hybrids (Qwen3.5): `perfledger plan`'s
search vs `aiconfigurator cli default`.

Per question, the reference CLI runs once (agg and disagg; minutes for these models) and our search answers the same
question on the wheel's data. Printed per mode: whether the best config is the same (parallelism, workers, batch), the
largest relative difference of tokens/s/GPU, tokens/s/user, TTFT and TPOT over the top-N and the Pareto front
(ours rounded to 0.001 as 0.12.0 writes them), and whether the fronts hold the same points. Empty answers are
compared as empty. The tests run one such question (tests/estimator/test_plan_agg.py); the rest is quoted from here.
Run: .venv/bin/python benchmarks/plan_parity.py [--questions 0,2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# (model, total GPUs, system, backend, version, isl, osl, TTFT ms, TPOT ms, database mode)
QUESTIONS = [
    ("moonshotai/Kimi-K3", 16, "h200_sxm", "vllm", "0.24.0", 4000, 500, 10000, 100, "hybrid"),
    ("moonshotai/Kimi-K3", 16, "b200_sxm", "sglang", "0.5.14", 4000, 500, 10000, 100, "silicon"),
    ("zai-org/GLM-5-FP8", 8, "h200_sxm", "sglang", "0.5.14", 4000, 500, 5000, 50, "silicon"),
    ("deepseek-ai/DeepSeek-V3", 8, "h200_sxm", "vllm", "0.24.0", 4000, 500, 5000, 50, "silicon"),
    ("zai-org/GLM-5-FP8", 16, "h200_sxm", "sglang", "0.5.14", 4000, 500, 5000, 50, "silicon"),
    ("deepseek-ai/DeepSeek-V3", 16, "h200_sxm", "vllm", "0.24.0", 4000, 500, 5000, 50, "silicon"),
    ("Qwen/Qwen3.5-35B-A3B", 8, "h200_sxm", "vllm", "0.24.0", 4000, 500, 5000, 50, "silicon"),
    ("Qwen/Qwen3.5-35B-A3B", 8, "h200_sxm", "sglang", "0.5.14", 4000, 500, 5000, 50, "silicon"),
    ("deepseek-ai/DeepSeek-V3", 8, "h200_sxm", "sglang", "0.5.14", 4000, 500, 5000, 50, "silicon"),
    ("deepseek-ai/DeepSeek-V3", 16, "h200_sxm", "sglang", "0.5.14", 4000, 500, 5000, 50, "silicon"),
    ("moonshotai/Kimi-K2.5", 8, "b200_sxm", "sglang", "0.5.14", 8000, 500, 5000, 50, "silicon"),
]
METRICS = ("tokens_per_s_per_gpu", "tokens_per_s_per_user", "ttft_ms", "tpot_ms")
SIDE = ("workers", "tp", "pp", "dp", "moe_tp", "moe_ep", "batch")


def _rel(a: float, b: float) -> float:
    return abs(round(a, 3) - b) / max(abs(b), 1e-12)


def _compare(ours: list[dict], theirs: list[dict], key) -> tuple[bool, float]:
    """(same points in the same order, max relative metric difference)."""
    same = [key(r) for r in ours] == [key(r) for r in theirs]
    worst = max((_rel(a[m], b[m]) for a, b in zip(ours, theirs, strict=False) for m in METRICS), default=0.0)
    return same, worst


def _side(row: dict, side: str) -> tuple:
    return tuple(row[side][k] for k in SIDE) if side in row else tuple(row[f"{side[0]}_{k}"] for k in SIDE)


def _show(ours: list[dict], theirs: list[dict], key) -> None:
    for a, b in zip(ours, theirs, strict=False):
        print("    ours", key(a), [round(a[m], 3) for m in METRICS])
        print("    ref ", key(b), [b[m] for m in METRICS])


def main() -> None:
    from perfledger.estimator.plan.question import Question
    from perfledger.estimator.plan.search import plan
    from perfledger.estimator.session import Estimator, open_source
    from tests.estimator.plan_oracle import REPLICA_COLUMNS, run_default

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", default=",".join(str(i) for i in range(len(QUESTIONS))))
    parser.add_argument("--show", action="store_true", help="print both sides' rows where they differ")
    args = parser.parse_args()
    est = Estimator(open_source("aic-package"))
    for i in (int(x) for x in args.questions.split(",")):
        model, gpus, system, backend, version, isl, osl, ttft, tpot, mode = QUESTIONS[i]
        q = Question(model, system, backend, gpus, isl, osl, ttft, tpot, version=version, database_mode=mode)
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            ref = run_default(q, Path(tmp), with_disagg=True)
            ref_s = time.perf_counter() - t0
            disagg_dirs = list(Path(tmp).glob("*/*/disagg"))
            ref_disagg = {f: pl.read_csv(disagg_dirs[0] / f"{f}.csv").rename(REPLICA_COLUMNS, strict=False).to_dicts()
                          for f in ("best_config_topn", "pareto")} if disagg_dirs else {}
        t0 = time.perf_counter()
        answer = plan(est, q)
        ours_s = time.perf_counter() - t0
        print(f"[{i}] {model} {gpus}x{system} {backend} {version} {mode} isl{isl} osl{osl} ttft{ttft} tpot{tpot}: "
              f"reference {ref_s:.0f} s, ours {ours_s:.1f} s")
        agg = answer.modes["agg"]
        agg_key = lambda r: (r["parallel"] if "parallel" in r else  # noqa: E731
                             f"tp{r['tp']}pp{r['pp']}dp{r['dp']}etp{r['moe_tp']}ep{r['moe_ep']}"
                             + (f"cp{r['cp']}" if r.get("cp", 1) > 1 else ""), r["batch"])
        for part, theirs in (("top", ref["top"].to_dicts()), ("pareto", ref["pareto"].to_dicts())):
            same, worst = _compare(getattr(agg, part), theirs, agg_key)
            print(f"  agg {part}: {len(getattr(agg, part))} vs {len(theirs)} rows, same points {same}, max rel {worst:.2e}")
            if args.show and (not same or worst > 1e-4):
                _show(getattr(agg, part), theirs, agg_key)
        if agg.top and len(ref["top"]):
            print(f"  agg best: ours {agg_key(agg.top[0])}, reference {ref['top']['parallel'][0]} bs{ref['top']['batch'][0]}")
        dis = answer.modes["disagg"]
        dis_key = lambda r: (_side(r, "prefill"), _side(r, "decode"))  # noqa: E731
        for part, ours_rows in (("best_config_topn", dis.top), ("pareto", dis.pareto)):
            theirs = ref_disagg.get(part, [])
            same = [dis_key(r) for r in ours_rows] == [dis_key(r) for r in theirs]
            worst = max((_rel(a[m], b[m]) for a, b in zip(ours_rows, theirs, strict=False) for m in METRICS), default=0.0)
            print(f"  disagg {part}: {len(ours_rows)} vs {len(theirs)} rows, same points {same}, max rel {worst:.2e}"
                  + ("" if ours_rows or not dis.reason else f" (ours: {dis.reason})"))
            if args.show and (not same or worst > 1e-4):
                _show(ours_rows, theirs, dis_key)


if __name__ == "__main__":
    main()
