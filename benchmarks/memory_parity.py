"""Static-path memory parity sweep: random deployments, ours (models/memory.py) vs aiconfigurator-core 0.12.0.

Why: `estimate static` reports per-GPU memory (weights, KV, activations, runtime, total) and whether it fits; 0.12.0's
`run_static` sizes the same deployment with its backend memory model (`_get_memory_usage` over the model's context
ops, then `set_memory_and_check_oom` with the static path's KV budget). This draws deployments over every wheel
model config (every system/backend/version of the wheel, tp / pp / moe_tp / moe_ep / attention-dp splits, batch
1–256, isl 64–32000, osl 2–2000, checkpoint-default or flagged GEMM / MoE / KV quants) and classifies each:
exact (every term within 1e-9 and the same fit and KV-fit decisions), rejected by 0.12.0 (it builds no model:
a layout or quant it refuses), rejected by us, or differs (which terms, and whether a quant was flagged). The
reference runs the same calls `run_static` makes (the op pricing it skips does not touch memory; the parity
test checks run_static's own summary on a few deployments). `--images`: requests carry images (VL models: isl +
image tokens, the vision encoder's weights and activations beside the model). Reusable: `--seed`, `--n`, `--json`, `--only`.

    .venv/bin/python benchmarks/memory_parity.py --n 500 --seed 1
    .venv/bin/python benchmarks/memory_parity.py --n 300 --only Qwen3-VL --images
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import static_parity  # noqa: E402 -- benchmarks/ is no package: the sweep's model list, targets and model paths

os.environ.setdefault("AIC_ALLOW_UNLISTED_VERSIONS", "1")

REL = 1e-9
GIB = float(1 << 30)
FLAGS = {"gemm": (None, None, None, "fp8", "fp8_block", "nvfp4"), "moe": (None, None, None, "fp8", "nvfp4", "w4a16_mxfp4"),
         "kv": (None, None, None, "fp8", "bfloat16")}


def draw(rng: random.Random, model_list, targets, images: bool = False) -> dict:
    """One deployment: a model, a (system, backend, version) of the wheel, a layout, a shape, quants (None: checkpoint);
    with `images`, each request's images too (height, width 16-2000 px, 1-4 of them, encoder DP on or off)."""
    model, kind, _ = rng.choice(model_list)
    system, backend, version, _ = rng.choice(targets)
    tp = rng.choice((1, 2, 4, 8, 16))
    moe_ep = 1 if kind == "dense" else rng.choice([d for d in (1, 2, 4, 8, 16) if tp % d == 0])
    dp = rng.choice((1, 1, 1, 2)) if kind == "moe" else 1
    return {"model": model, "kind": kind, "system": system, "backend": backend, "version": version, "tp": tp,
            "pp": rng.choice((1, 1, 1, 2)), "dp": dp, "moe_tp": tp * dp // moe_ep, "moe_ep": moe_ep,
            "batch": round(math.exp(rng.uniform(0, math.log(256)))),
            "isl": round(math.exp(rng.uniform(math.log(64), math.log(32000)))),
            "osl": round(math.exp(rng.uniform(math.log(2), math.log(2000)))),
            **{f"{q}_quant": rng.choice(choices) for q, choices in FLAGS.items()},
            **({"image_height": rng.randint(16, 2000), "image_width": rng.randint(16, 2000), "num_images": rng.randint(1, 4),
                "encoder_dp": rng.random() < 0.5} if images else {})}


def reference(d: dict):
    """0.12.0's static-path memory of `d`: ({weights, kvcache, activations, nccl, others, total} in bytes, fits,
    kv_fits), or (None, why) where it builds no model for it."""
    from aiconfigurator_core.sdk import engine as E
    from aiconfigurator_core.sdk.backends.factory import get_backend
    from aiconfigurator_core.sdk.config import RuntimeConfig
    from aiconfigurator_core.sdk.inference_summary import InferenceSummary

    try:
        cfg = E.build_model_config(tp_size=d["tp"], pp_size=d["pp"], attention_dp_size=d["dp"], moe_tp_size=d["moe_tp"],
                                   moe_ep_size=d["moe_ep"], gemm_quant_mode=d["gemm_quant"],
                                   kvcache_quant_mode=d["kv_quant"], fmha_quant_mode=None, moe_quant_mode=d["moe_quant"],
                                   comm_quant_mode=None, forward_model=None, attention_backend=None,
                                   enable_encoder_dp=d.get("encoder_dp", True))
        model = E.get_model(static_parity.reference_model_path(d["model"]), cfg, d["backend"])
        database = _database(d["system"], d["backend"], d["version"])
        be = get_backend(d["backend"])
        runtime = RuntimeConfig(batch_size=d["batch"], beam_width=1, isl=d["isl"], osl=d["osl"],
                                image_height=d.get("image_height", 0), image_width=d.get("image_width", 0),
                                num_images_per_request=d.get("num_images", 1))
        mem = be._get_memory_usage(model, database, d["batch"], 1, d["isl"] + be._visual_context_tokens(model, runtime),
                                   d["osl"], prefix=0, mtp_scaled_tokens=0,
                                   encoder_memory=be._get_encoder_component_memory_for_runtime(model, runtime, d["batch"]))
        summary = InferenceSummary(runtime)
        capacity = database.system_spec["gpu"]["mem_capacity"]
        summary.set_memory_and_check_oom(mem, capacity, **be._static_oom_check_kwargs(
            capacity, backend_version=database.version, model_config=model.config))
    except Exception as exc:  # noqa: BLE001 -- 0.12.0 refuses with several exception types
        return None, f"{type(exc).__name__}: {str(exc)[:140]}"
    quants = {q: getattr(model.config, f"{attr}_quant_mode").name for q, attr in
              (("gemm", "gemm"), ("moe", "moe"), ("kv", "kvcache"))}
    return ({k: v * GIB for k, v in mem.items()}, not summary.check_oom(), not summary.check_kv_cache_oom(), quants), ""


_DATABASES: dict = {}


def _database(system: str, backend: str, version: str):
    """0.12.0's database for a target, loaded once (its system spec is what the memory model reads)."""
    from aiconfigurator_core.sdk import engine as E

    key = (system, backend, version)
    if key not in _DATABASES:
        _DATABASES[key] = E._maybe_load_database(system, backend, version, None)
        if _DATABASES[key] is None:
            raise LookupError(f"no 0.12.0 database for {key}")
    return _DATABASES[key]


def ours(d: dict):
    """Our static-path memory of `d` (models/memory.py `deployment_memory` at the quants `estimate static` resolves)."""
    from perfledger.estimator.errors import EstimatorError
    from perfledger.estimator.models.config import model_config
    from perfledger.estimator.models.memory import deployment_memory, quant_labels
    from perfledger.estimator.models.vision import Images
    from perfledger.estimator.quant.checkpoint import resolve as resolve_quants

    try:
        config = model_config(d["model"])
        quants = resolve_quants(config, d["backend"], {"gemm": d["gemm_quant"], "moe": d["moe_quant"],
                                                       "kv": d["kv_quant"], "fmha": None})
        labels, flagged = quant_labels(quants)
        mem = deployment_memory(config, d["system"], d["backend"], tp=d["tp"], moe_tp=d["moe_tp"], moe_ep=d["moe_ep"],
                                quants=labels, batch=d["batch"], isl=d["isl"], osl=d["osl"], version=d["version"],
                                pp=d["pp"], dp=d["dp"], static_path=True, flagged=flagged,
                                images=Images(d.get("image_height", 0), d.get("image_width", 0), d.get("num_images", 1),
                                              d.get("encoder_dp", True)))
    except EstimatorError as exc:
        return None, f"{type(exc).__name__}: {str(exc)[:140]}"
    return mem, labels


def compare(mem, ref) -> list[str]:
    """The terms (and decisions) where ours and 0.12.0's differ."""
    theirs, fits, kv_fits, _ = ref
    pairs = {"weights": (mem.weights, theirs["weights"]), "kv": (mem.kv, theirs["kvcache"]),
             "activations": (mem.activations, theirs["activations"]), "nccl": (mem.nccl, theirs["nccl"]),
             "others": (mem.others, theirs["others"]), "total": (mem.total, theirs["total"])}
    bad = [f"{k} {a / GIB:.4f} vs {b / GIB:.4f} GiB" for k, (a, b) in pairs.items()
           if abs(a - b) > REL * max(abs(a), abs(b), 1.0)]
    if mem.fits != fits:
        bad.append(f"fits {mem.fits} vs {fits}")
    if fits and mem.kv_fits != kv_fits:  # 0.12.0 asks the KV budget only of a deployment whose total fits
        bad.append(f"kv_fits {mem.kv_fits} vs {kv_fits}")
    return bad


def run_one(d: dict) -> dict:
    ref, why = reference(d)
    if ref is None:
        return {**d, "outcome": "rejected by 0.12.0", "why": why}
    mem, labels = ours(d)
    if mem is None:
        return {**d, "outcome": "rejected by us", "why": labels}
    bad = compare(mem, ref)
    if not bad:
        return {**d, "outcome": "exact"}
    flagged = sorted(q for q in FLAGS if d[f"{q}_quant"] is not None)
    return {**d, "outcome": "differs", "differing": bad, "ours_quants": labels, "their_quants": ref[3],
            "flagged": flagged}


def architecture(model: str) -> str:
    from perfledger.estimator.models.config import model_config

    return model_config(model).architecture


def print_table(rows: list[dict], seconds: float) -> None:
    static_parity.print_counts(rows, "arch", ["exact", "rejected by 0.12.0", "rejected by us", "differs"], "architecture",
                               (44, 20))
    print(f"{len(rows)} deployments in {seconds:.0f} s")
    why = Counter((r["outcome"], r.get("why", "")[:100]) for r in rows if r["outcome"].startswith("rejected"))
    for (outcome, text), n in why.most_common(12):
        print(f"  {n:>5} {outcome}: {text}")
    diff = Counter((r["arch"], ",".join(r["flagged"]) or "none", r["differing"][0].split(" ")[0]) for r in rows
                   if r["outcome"] == "differs")
    for (arch, flagged, what), n in diff.most_common():
        print(f"  {n:>5} differ: {arch}, flagged quants {flagged}, first term {what}")
    for r in [r for r in rows if r["outcome"] == "differs"][:10]:
        print(f"    {r['model']} {r['system']} {r['backend']} {r['version']} tp{r['tp']} pp{r['pp']} dp{r['dp']} "
              f"mtp{r['moe_tp']} ep{r['moe_ep']} b{r['batch']} isl{r['isl']} osl{r['osl']} "
              f"ours {r['ours_quants']} theirs {r['their_quants']}: {'; '.join(r['differing'])}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated: model id substrings or architectures")
    ap.add_argument("--images", action="store_true", help="requests carry images (VL models price their vision encoder)")
    args = ap.parse_args(argv)
    wanted = [part.lower() for part in args.only.split(",") if part] or [""]
    model_list = [m for m in static_parity.models()
                  if any(part in m[0].lower() or part == architecture(m[0]).lower() for part in wanted)]
    if not model_list:
        ap.error(f"--only {args.only!r} matches no wheel model config the estimator prices")
    rng, targets = random.Random(args.seed), static_parity.deployments_targets()
    start, rows = time.perf_counter(), []
    for _ in range(args.n):
        d = draw(rng, model_list, targets, args.images)
        rows.append({**run_one(d), "arch": architecture(d["model"])})
        if args.json:
            print(json.dumps(rows[-1]), flush=True)
    if not args.json:
        print_table(rows, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
