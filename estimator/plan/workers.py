"""Disaggregated worker candidates: prefill-only and decode-only static estimates over layouts and batch sizes.

Why: the disagg search (disagg.py) matches prefill workers with decode workers, so it needs each role's
throughput and latency for every layout the role sweeps (plan/space.py) at every batch size that fits. As
0.12.0 does: a prefill worker is one context pass of `batch` requests (isl − prefix new tokens each; TTFT =
its latency × the prefill correction), a decode worker the decode steps of `batch` requests (TPOT = Σ steps /
(osl − 1) × the decode correction, steps in strides of 32); a layout's batch sweep ends at the first size whose
memory or KV budget does not fit. Every point of a role is priced in one batch call per op kind (plan/evaluate.py); metrics are
rounded to 0.001 as 0.12.0's worker tables are, since its matching and sorting read them rounded.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from perfledger.estimator.errors import EstimatorError, UnsupportedModelError
from perfledger.estimator.models.config import catalog, resolve_model
from perfledger.estimator.models.context_parallel import prices_context_parallel
from perfledger.estimator.models.plans.registry import load_model
from perfledger.estimator.plan.disagg import decode_batches, settings
from perfledger.estimator.plan.evaluate import price_many, price_steps
from perfledger.estimator.plan.fit import memory_model
from perfledger.estimator.plan.large_ep import sized_memory, switched
from perfledger.estimator.plan.question import Question, role_quants
from perfledger.estimator.plan.space import DIMS, check_node_ep, enumerate_parallel
from perfledger.estimator.static import Deploy, check_deploy, decode_passes, pass_ops, under_flags

ROLE_PHASES = {"prefill": ("context",), "decode": ("generation",)}
COLUMNS = (*DIMS, "batch", "global_batch", "gpus", "ttft_ms", "tpot_ms", "seq_s", "seq_s_gpu", "tokens_s_user",
           "concurrency", "memory_gib")


@dataclass(frozen=True)
class Misses:
    """Why layouts gave no worker: those that do not fit at batch 1, those that cannot be priced (one message each)."""

    unfit: tuple[str, ...] = ()
    no_data: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()  # layouts the estimator refuses to price (UnsupportedModelError), not a data gap
    notes: tuple[str, ...] = ()  # how the role's quants were settled (an fp8 FMHA priced at bfloat16 for want of data)




def candidates(est, q: Question, role: str, *, batches: list[int] | None = None,
               with_tiers: bool = False) -> tuple[pl.DataFrame, Misses]:
    """(worker frame in COLUMNS, why layouts gave none) of one role ("prefill" or "decode") for the question.

    batches: only these sizes (plan/feasible.py's cheap witness); with_tiers: add a `tiers` column, the source
    tiers of each worker's ops comma-joined (the support matrix grades a row by them)."""
    config = resolve_model(q.model)
    quants = role_quants(est, config, q, context=role == "prefill")
    m = under_flags(load_model(config), config.architecture, quants)
    doc = settings()
    spec = est.spec(q.system)
    base = Deploy(q.system, q.backend, q.version, sm_version=spec.sm_version,
                  **{f"{k}_quant": v["quant"] for k, v in quants.items()})
    memory = memory_model(config, q.system, q.backend, q.version, quants)
    is_moe = bool(getattr(m.dims, "experts", 0))
    layouts = enumerate_parallel(role, moe=is_moe, backend=q.backend, system=q.system, total_gpus=q.total_gpus,
                                 context_parallel=prices_context_parallel(m, q.backend))
    if batches is None:
        batches = list(range(1, doc["prefill_max_batch"] + 1)) if role == "prefill" else decode_batches(doc)
    frames, unfit, no_data, refused = [], [], [], []
    for p in layouts:  # a layout that cannot be priced is skipped, as 0.12.0 skips it, and named
        d = replace(base, tp=p.tp, moe_tp=p.moe_tp, moe_ep=p.moe_ep, pp=p.pp, attention_dp=p.dp, cp=p.cp, nextn=q.nextn)
        d = switched(est, m, d, ROLE_PHASES[role], q.quants)
        a2a, sized = bool(d.moe_a2a), sized_memory(memory, m, d)
        fitting = []
        for b in batches:
            mem = (sized.worker(p, batch=b, seq_tokens=q.isl + 1, tokens=b * (q.isl - q.prefix), static_path=True, a2a=a2a)
                   if role == "prefill" else
                   sized.worker(p, batch=b, seq_tokens=q.isl + q.osl, tokens=b, nextn=q.nextn, static_path=True, a2a=a2a))
            if not (mem.fits and mem.kv_fits):
                break
            fitting.append((p, d, b, mem.total))
        if not fitting:
            unfit.append(p.label)
            continue
        try:
            check_node_ep(p, spec.num_gpus_per_node, a2a)
            check_deploy(m, d, config)
            tiers = [set() for _ in fitting] if with_tiers else None
            frame = _frame(fitting, _latency(est, m, spec, q, role, fitting, tiers), q, role)
            frames.append(frame.with_columns(tiers=pl.Series([",".join(sorted(t)) for t in tiers])) if tiers else frame)
        except UnsupportedModelError as exc:
            refused.append(f"{p.label}: {exc}")
        except EstimatorError as exc:
            no_data.append(f"{p.label}: {exc}")
    misses = Misses(tuple(unfit), tuple(no_data), tuple(refused), (quants["fmha"]["note"],) if "note" in quants["fmha"] else ())
    if not frames:
        return pl.DataFrame(schema=dict.fromkeys(COLUMNS, pl.Float64)), misses
    return pl.concat(frames), misses


def _latency(est, m, spec, q: Question, role: str, points, tiers: list[set] | None = None) -> np.ndarray:
    """Corrected TTFT (prefill) or TPOT (decode) per point, ms; all points priced together (`tiers`: one set per
    point, filled with its ops' source tiers)."""
    mode = q.database_mode
    if role == "prefill":
        lists = [pass_ops(m, d, b * (q.isl - q.prefix), True, b, q.isl, prefix=q.prefix) for _, d, b, _ in points]
        priced = price_many(est, lists, spec, mode, tiers)
        return np.array([sum(ms.values()) for ms in priced]) * settings()["latency_correction"]["prefill"]
    stride = catalog()["decode_stride"]
    steps = [(i, min(stride, q.osl - 1 - i)) for i in range(0, q.osl - 1, stride)]
    passes = [decode_passes(m, d, b, [q.isl + i + 1 for i, _ in steps]) for _, d, b, _ in points]
    step_ms = price_steps(est, passes, spec, mode, tiers)
    total = np.array([sum(ms * repeat for ms, (_, repeat) in zip(point, steps, strict=True)) for point in step_ms])
    return total / max(q.osl - 1, 1) * settings()["latency_correction"]["decode"]


def _frame(points, latency: np.ndarray, q: Question, role: str) -> pl.DataFrame:
    """0.12.0's per-worker metrics from the corrected latency, rounded to 0.001."""
    p_of = [p for p, _, _, _ in points]
    batch = np.array([b for _, _, b, _ in points])
    tp, pp, dp = (np.array([getattr(p, a) for p in p_of]) for a in ("tp", "pp", "dp"))
    global_batch = batch * dp
    if role == "prefill":
        ttft, tpot, request_latency = latency, np.zeros_like(latency), latency
    else:
        ttft, tpot, request_latency = np.zeros_like(latency), latency, latency * max(q.osl - 1, 0)
    seq_s = np.where(request_latency > 0, global_batch / np.where(request_latency > 0, request_latency, 1.0) * 1000 * pp, 0.0)
    seq_s_gpu = seq_s / tp / pp / dp
    user = np.where(tpot > 0, 1000.0 / np.where(tpot > 0, tpot, 1.0), 0.0)
    gib = np.array([mem / (1 << 30) for _, _, _, mem in points])

    def r(x):
        return np.round(x, 3)

    return pl.DataFrame({"tp": tp, "pp": pp, "dp": dp, "moe_tp": [p.moe_tp for p in p_of],
                         "moe_ep": [p.moe_ep for p in p_of], "cp": [p.cp for p in p_of], "batch": batch,
                         "global_batch": global_batch,
                         "gpus": np.array([p.gpus for p in p_of]), "ttft_ms": r(ttft), "tpot_ms": r(tpot),
                         "seq_s": r(seq_s), "seq_s_gpu": r(seq_s_gpu), "tokens_s_user": r(user),
                         "concurrency": global_batch, "memory_gib": r(gib),
                         "large_ep": [bool(d.moe_a2a) for _, d, _, _ in points]})

