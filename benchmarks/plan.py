"""Deployment planning speed: `perfledger plan` vs `aiconfigurator cli default` (0.12.0), the same questions side by side.

Per question, three timings (medians over --repeats): ours warm (in-process `search.plan` on an Estimator that
has answered the question once, so its tables and grids are loaded), ours cold (a fresh `perfledger plan --json
--out DIR` process: imports, data load, search, rendering and the plot) and the reference (a fresh `aiconfigurator
cli default` process, which also writes its configs and plot). Both answer agg and disagg on the wheel's data.
Prints the ratios reference / ours. Run: .venv/bin/python benchmarks/plan.py [--repeats 3] [--questions 0,1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
# (model, total GPUs, system, backend, isl, osl, TTFT ms, TPOT ms)
QUESTIONS = [
    ("Qwen/Qwen3-32B", 8, "h200_sxm", "vllm", 4000, 500, 2000, 30),
    ("Qwen/Qwen3-32B", 4, "h200_sxm", "trtllm", 1000, 1000, 500, 40),
    ("Qwen/Qwen3-30B-A3B", 8, "h200_sxm", "vllm", 2000, 500, 1000, 20),
]


def _args(q) -> list[str]:
    model, gpus, system, backend, isl, osl, ttft, tpot = q
    return ["--total-gpus", str(gpus), "--system", system, "--backend", backend, "--isl", str(isl), "--osl", str(osl),
            "--ttft", str(ttft), "--tpot", str(tpot)]


def _timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "MPLBACKEND": "Agg"})
    return time.perf_counter() - t0


def ours_warm(q, repeats: int) -> list[float]:
    from perfledger.estimator.plan.question import Question, resolve_version
    from perfledger.estimator.plan.search import plan
    from perfledger.estimator.session import Estimator, open_source

    model, gpus, system, backend, isl, osl, ttft, tpot = q
    est = Estimator(open_source("aic-package"))
    question = resolve_version(est.source, Question(model, system, backend, gpus, isl, osl, ttft, tpot))
    plan(est, question)  # warm-up: tables, grids, sites loaded once per process
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        plan(est, question)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--questions", default=",".join(str(i) for i in range(len(QUESTIONS))))
    args = ap.parse_args()
    rows = []
    for i in (int(x) for x in args.questions.split(",")):
        q = QUESTIONS[i]
        warm = statistics.median(ours_warm(q, args.repeats))
        cold, ref = [], []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                cold.append(_timed([str(BIN / "perfledger"), "plan", "--model", q[0], *_args(q), "--data", "aic-package",
                                    "--json", "--out", str(Path(tmp) / "ours")]))
                ref.append(_timed([str(BIN / "aiconfigurator"), "cli", "default", "--model-path", q[0], *_args(q),
                                   "--save-dir", str(Path(tmp) / "ref"), "--log-level", "WARNING"]))
        cold_s, ref_s = statistics.median(cold), statistics.median(ref)
        rows.append((f"{q[0]} {q[1]}×{q[2]} {q[3]} isl{q[4]} osl{q[5]}", warm, cold_s, ref_s))
        print(f"[{i}] {rows[-1][0]}: ours warm {warm:.2f} s, ours cold {cold_s:.2f} s, reference {ref_s:.2f} s "
              f"(×{ref_s / warm:.1f} warm, ×{ref_s / cold_s:.1f} cold)", flush=True)
    print(f"\n{'question':<55}{'ours warm s':>12}{'ours cold s':>12}{'ref s':>9}{'ref/warm':>10}{'ref/cold':>10}")
    for name, warm, cold_s, ref_s in rows:
        print(f"{name:<55}{warm:>12.2f}{cold_s:>12.2f}{ref_s:>9.2f}{ref_s / warm:>10.1f}{ref_s / cold_s:>10.1f}")
    print(f"(medians of {args.repeats}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
