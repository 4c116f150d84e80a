"""Whole-model static parity sweep: random deployments, ours (`estimate static`) vs aiconfigurator-core 0.12.0.

Why: the per-op parity suites pin chosen points; this draws deployments over every model config both sides
support (every models.yaml architecture: dense, MoE, hybrid MoE, Gemma-4, DeciLM, K3, GLM-5, ...; bf16 / fp8 /
fp8_block / nvfp4 / mxfp4 checkpoints), every system/backend/version of the wheel,
tp / moe_tp / moe_ep splits, batch 1–64, isl 64–16000, osl 2–300, default quants, SILICON and HYBRID (`--modes`);
with `--cp-share P` that share of the draws on a backend whose models.yaml `context_parallel` prices the
architecture becomes a context-parallel one (cp 2 / 4 / 8 at tp 1, its MoE width cp, drawn from a second generator
so the other draws stay those of the seed); and classifies each: agree (TTFT, TPOT and every op within 1e-6), both
miss, only we miss, only they miss, differs (worst op and its relative error). Reusable: `--seed`, `--n`, `--json`
(one object per deployment, then a summary object), `--only SUBSTRING[,SUBSTRING...]` (models whose HF id contains
any of them, or whose architecture is one).

    .venv/bin/python benchmarks/static_parity.py --n 300 --seed 1
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("AIC_ALLOW_UNLISTED_VERSIONS", "1")

REL = 1e-6
TPS = (1, 2, 4, 8)
COLLECTIVE_LIBS = {"nccl", "oneccl"}  # comm-table dirs, not serving backends


def wheel_dir() -> Path:
    import aiconfigurator_core

    return Path(aiconfigurator_core.__file__).parent


def models() -> list[tuple[str, str, tuple[str, ...]]]:
    """(Org/Model, family, backends pricing its context parallelism) for every wheel model config whose architecture
    models.yaml prices."""
    from perfledger.estimator.models.config import catalog

    arches = catalog()["architectures"]
    out = []
    for path in sorted((wheel_dir() / "model_configs").glob("*_config.json")):
        if path.name.endswith("_hf_quant_config.json"):
            continue
        cfg = json.loads(path.read_text())
        arch = (cfg.get("architectures") or ["?"])[0]
        if arch in arches:
            out.append((path.name.removesuffix("_config.json").replace("--", "/", 1), arches[arch]["kind"],
                        tuple(arches[arch].get("context_parallel") or ())))
    return out


def deployments_targets() -> list[tuple[str, str, str, bool]]:
    """Every (system, backend, version, has own GEMM data) under the wheel's systems/data/<system>/<op>/<backend>/<version>."""
    data = wheel_dir() / "systems" / "data"
    found = {(p.parts[-4], p.parts[-2], p.parts[-1], (data / p.parts[-4] / "gemm" / p.parts[-2] / p.parts[-1]).is_dir())
             for p in data.glob("*/*/*/*") if p.is_dir() and p.parts[-2] not in COLLECTIVE_LIBS}
    return sorted(found)


def draw(rng: random.Random, model_list, targets, modes=("SILICON", "HYBRID"), cp_rng: random.Random | None = None,
         cp_share: float = 0.0) -> dict:
    model, kind, cp_backends = rng.choice(model_list)
    # 4 in 5 draws from versions with their own GEMM tables (else nearly every draw is a both-miss)
    full = [t for t in targets if t[3]]
    system, backend, version, _ = rng.choice(full if rng.random() < 0.8 else targets)
    tp = rng.choice(TPS)
    moe_ep = 1 if kind == "dense" else rng.choice([d for d in TPS if tp % d == 0])
    moe_tp = 1 if kind == "dense" else tp // moe_ep
    drawn = {"model": model, "kind": kind, "system": system, "backend": backend, "version": version, "tp": tp,
             "moe_tp": moe_tp, "moe_ep": moe_ep, "cp": 1, "batch": round(math.exp(rng.uniform(0, math.log(64)))),
             "isl": round(math.exp(rng.uniform(math.log(64), math.log(16000)))), "osl": rng.randint(2, 300),
             "mode": rng.choice(list(modes))}
    if cp_rng is not None and backend in cp_backends and cp_rng.random() < cp_share:
        cp = cp_rng.choice(TPS[1:])
        moe_ep = 1 if kind == "dense" else cp_rng.choice([d for d in TPS if cp % d == 0])
        drawn |= {"tp": 1, "cp": cp, "moe_ep": moe_ep, "moe_tp": 1 if kind == "dense" else cp // moe_ep}
    return drawn


def ours(est, d: dict):
    """(result dict or None, miss text)."""
    from perfledger.estimator.errors import EstimatorError
    from perfledger.estimator.static import Deploy, static

    dep = Deploy(d["system"], d["backend"], d["version"], tp=d["tp"], moe_tp=d["moe_tp"], moe_ep=d["moe_ep"],
                 cp=d.get("cp", 1))
    try:
        return static(est, d["model"], dep, batch=d["batch"], isl=d["isl"], osl=d["osl"], mode=d["mode"].lower()), ""
    except EstimatorError as exc:
        return None, f"{type(exc).__name__}: {str(exc)[:160]}"
    except Exception as exc:  # noqa: BLE001 -- not a typed miss: a bug on our side, reported as such
        return None, f"CRASH {type(exc).__name__}: {str(exc)[:160]}"


def reference_model_path(model: str) -> str:
    """What 0.12.0 is handed for `model`: the HF id where its DefaultHFModels list holds it (it reads its bundled
    config then), else a folder holding the wheel's config.json (+ hf_quant_config.json), which it reads as a local
    checkpoint: ids outside that list (Mixtral) it would otherwise fetch from the Hub, which this sweep cannot reach."""
    import shutil
    import tempfile

    from aiconfigurator_core.sdk.common import DefaultHFModels

    if model in DefaultHFModels:
        return model
    stem = model.replace("/", "--")
    folder = Path(tempfile.gettempdir()) / f"static_parity_{os.getuid()}" / stem
    folder.mkdir(parents=True, exist_ok=True)
    for suffix, name in (("_config.json", "config.json"), ("_hf_quant_config.json", "hf_quant_config.json")):
        if (src := wheel_dir() / "model_configs" / f"{stem}{suffix}").is_file():
            shutil.copyfile(src, folder / name)
    return str(folder)


def reference(d: dict):
    """0.12.0's (ttft, decode ms over osl − 1 steps, {phase: {op: ms}}) with its default (checkpoint) quants, or
    (None, miss text). The database is loaded for the drawn mode, as its `cli estimate` loads it (EMPIRICAL and SOL
    views carry no shared layer of earlier versions or lenders), its context FMHA settled by that data as `cli estimate`
    settles it (resolve_context_fmha_by_data), and the mode is set in the compiled engine spec."""
    from dataclasses import replace

    import aiconfigurator_core
    from aiconfigurator_core.sdk import engine as E
    from aiconfigurator_core.sdk.models import resolve_context_fmha_by_data
    from aiconfigurator_core.sdk.perf_database import get_database_view

    model_path = reference_model_path(d["model"])
    try:
        cp = d.get("cp", 1)  # the config validates moe width = tp x cp, so cp and the width go in together
        cfg = E.build_model_config(tp_size=d["tp"], pp_size=1, attention_dp_size=1,
                                   moe_tp_size=d["moe_tp"] if cp == 1 else 1, moe_ep_size=d["moe_ep"] if cp == 1 else 1,
                                   gemm_quant_mode=None, kvcache_quant_mode=None, fmha_quant_mode=None,
                                   moe_quant_mode=None, comm_quant_mode=None, forward_model=None,
                                   attention_backend=None)
        if cp > 1:
            cfg = replace(cfg, cp_size=cp, moe_tp_size=d["moe_tp"], moe_ep_size=d["moe_ep"])
        version = E._literal_backend_version(d["system"], d["backend"], d["version"], None, None)
        database = get_database_view(d["system"], d["backend"], version, allow_missing_data=d["mode"] != "SILICON",
                                     database_mode=d["mode"])
        resolve_context_fmha_by_data(cfg, model_path, database, d["backend"], is_context_role=True)
        spec = json.loads(E.build_engine_spec_json(
            E.get_model(model_path, cfg, d["backend"]), model_path=model_path, system=d["system"],
            backend=d["backend"], backend_version=version, kv_block_size=None, systems_path=None, nextn=0,
            database=database))
        spec["engine"]["database_mode"] = d["mode"]
        engine = E.EngineHandle(aiconfigurator_core.engine_spec_bincode_from_json(json.dumps(spec)))
        shape = {"batch_size": d["batch"], "isl": d["isl"], "osl": d["osl"]}
        ttft, gen_ms, _ = engine.run_static(**shape)
        ctx, gen = engine.run_static_per_op(**shape)[:2]
    except Exception as exc:  # noqa: BLE001 -- 0.12.0 signals misses with several exception types
        return None, f"{type(exc).__name__}: {str(exc)[:160]}"
    phases = {p: {name.removeprefix(f"{p}_"): ms for name, ms, *_ in ops if name != f"{p}_p2p"}
              for p, ops in (("context", ctx), ("generation", gen))}
    return (ttft, gen_ms, phases), ""


def rel_err(a: float, b: float) -> float:
    return 0.0 if a == b else abs(a - b) / max(abs(a), abs(b), 1e-300)


def compare(mine: dict, ref, osl: int) -> list[tuple[str, float]]:
    """(what, rel err) for every quantity past REL: 'phase/op', 'phase/op (only ours|only theirs)', ttft, tpot."""
    ttft, gen_ms, phases = ref
    bad = []
    for phase, want in phases.items():
        have = mine[phase]
        for name in set(want) | set(have):
            if name not in have:
                if want[name]:
                    bad.append((f"{phase}/{name} (only theirs)", 1.0))
            elif name not in want:
                if have[name]:
                    bad.append((f"{phase}/{name} (only ours)", 1.0))
            elif (e := rel_err(have[name], want[name])) > REL:
                bad.append((f"{phase}/{name}", e))
    for what, a, b in (("ttft", mine["ttft_ms"], ttft), ("tpot", mine["tpot_ms"], gen_ms / (osl - 1) if osl > 1 else 0.0)):
        if (e := rel_err(a, b)) > REL:
            bad.append((what, e))
    return sorted(bad, key=lambda x: -x[1])


def run_one(est, d: dict) -> dict:
    mine, my_miss = ours(est, d)
    ref, ref_miss = reference(d)
    if mine is None and ref is None:
        return {**d, "outcome": "both miss", "ours": my_miss, "theirs": ref_miss}
    if mine is None:
        return {**d, "outcome": "only we miss", "ours": my_miss}
    if ref is None:
        return {**d, "outcome": "only they miss", "theirs": ref_miss}
    quants = "/".join(str(v["quant"]) for v in mine["quants"].values())
    bad = compare(mine, ref, d["osl"])
    if not bad:
        return {**d, "outcome": "agree", "quants": quants}
    return {**d, "outcome": "differs", "quants": quants, "worst": bad[0][0], "rel_err": bad[0][1],
            "differing": [f"{w} {e:.2e}" for w, e in bad]}


def summary(rows: list[dict]) -> dict:
    by_kind = Counter((r["kind"], r["outcome"]) for r in rows)
    by_op = Counter(r["worst"].split(" ")[0] for r in rows if r["outcome"] == "differs")
    misses = Counter((r["outcome"], (r.get("ours") or r.get("theirs") or "")[:90]) for r in rows
                     if r["outcome"] in ("only we miss", "only they miss"))
    return {"n": len(rows), "outcomes": dict(Counter(r["outcome"] for r in rows)),
            "by_kind": {f"{k}|{o}": n for (k, o), n in sorted(by_kind.items())},
            "differs_worst_op": dict(by_op.most_common()),
            "one_sided_misses": {f"{o}|{m}": n for (o, m), n in misses.most_common()}}


def print_counts(rows: list[dict], key: str, outcomes: list[str], label: str, widths: tuple[int, int]) -> None:
    """Outcome counts per `key` value and over all rows (also benchmarks/memory_parity.py's table)."""
    first, col = widths
    print(f"{label:<{first}}" + "".join(f"{o:>{col}}" for o in outcomes) + f"{'total':>8}")
    for k in sorted({r[key] for r in rows}) + ["all"]:
        sel = [r for r in rows if k in ("all", r[key])]
        print(f"{k:<{first}}" + "".join(f"{sum(r['outcome'] == o for r in sel):>{col}}" for o in outcomes) + f"{len(sel):>8}")


def print_table(rows: list[dict], seconds: float) -> None:
    print_counts(rows, "kind", ["agree", "both miss", "only we miss", "only they miss", "differs"], "family", (10, 16))
    print(f"{len(rows)} deployments in {seconds:.0f} s")
    for r in rows:
        if r["outcome"] in ("differs", "only we miss", "only they miss"):
            where = f"{r['model']} {r['system']} {r['backend']} {r['version']} tp{r['tp']} mtp{r['moe_tp']} ep{r['moe_ep']} " \
                    f"cp{r.get('cp', 1)} " \
                    f"b{r['batch']} isl{r['isl']} osl{r['osl']} {r['mode']}"
            what = f"{r['worst']} rel {r['rel_err']:.2e}" if r["outcome"] == "differs" else (r.get("ours") or r.get("theirs"))
            print(f"  {r['outcome']:<14} {where}: {what}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--modes", default="SILICON,HYBRID", help="comma-separated database modes to draw from (also EMPIRICAL, SOL)")
    ap.add_argument("--cp-share", type=float, default=0.0,
                    help="share of draws on a context-parallel backend of the model drawn as cp 2 / 4 / 8 (default 0)")
    ap.add_argument("--only", default="", help="comma-separated: restrict to models whose name contains any of these (any case)")
    args = ap.parse_args(argv)
    from perfledger.estimator.session import Estimator, open_source

    est = Estimator(open_source("aic-package"))
    rng = random.Random(args.seed)
    priced = models()
    wanted = [part.lower() for part in args.only.split(",") if part] or [""]
    from perfledger.estimator.models.config import model_config

    # `--only kimi` finds moonshotai/Kimi-K3; `--only NemotronHForCausalLM` every config of that architecture
    model_list = [m for m in priced if any(part in m[0].lower() or part == model_config(m[0]).architecture.lower()
                                           for part in wanted)]
    if not model_list:
        ap.error(f"--only {args.only!r} matches no model the estimator prices; models: {', '.join(m for m, *_ in priced)}")
    targets = deployments_targets()
    start, rows = time.perf_counter(), []
    cp_rng = random.Random(f"cp-{args.seed}") if args.cp_share else None
    for _ in range(args.n):
        row = run_one(est, draw(rng, model_list, targets, args.modes.split(","), cp_rng, args.cp_share))
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
    if args.json:
        print(json.dumps({"summary": summary(rows), "seconds": time.perf_counter() - start}))
    else:
        print_table(rows, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
