"""Aggregated serving (in-flight batching): the step schedule of one worker and the agg search over worker configs.

One operating point is (worker parallelism, batch b, context-token budget ctx per step). As 0.12.0's agg model,
a request's prefill runs in mixed steps (ctx context tokens beside the decode requests, plan/steps.py) until all b
requests have their context (ceil(isl·b / ctx) steps), then decode-only steps of b requests fill the osl
iterations. TTFT = (mixed step × ceil(isl / ctx) + dispatch) × a queueing factor; TPOT = the step time averaged
over the steps that emit tokens; throughput = b (osl − 1) tokens over the whole schedule (vLLM: capped by
Little's law), × pp × attention-dp for the worker. Backend rules are data (agg.yaml).

The search sweeps every configuration of plan/space.py that fits the GPU budget, batch sizes and context budgets
(stopping a batch's budgets at the first that does not fit memory, as 0.12.0 does), prices every step of every
point with one batch call per op kind (plan/evaluate.py), keeps the points meeting TTFT, and selects as
`aiconfigurator cli default` does: per TPOT threshold of its Pareto sweep the top points by seq/s of each
configuration, the Pareto front over (tokens/s/user, tokens/s/GPU on the cluster), and the best point per
configuration under the TPOT target.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from math import ceil, log2
from pathlib import Path

import numpy as np
import polars as pl

from perfledger.estimator.errors import EstimatorError, UnsupportedModelError
from perfledger.estimator.models.config import resolve_model
from perfledger.estimator.models.context_parallel import prices_context_parallel
from perfledger.estimator.models.memory import Memory, MemoryModelError
from perfledger.estimator.models.plans.registry import load_model
from perfledger.estimator.plan.evaluate import price_many
from perfledger.estimator.plan.fit import MemoryModel, memory_model
from perfledger.estimator.plan.large_ep import PHASES, sized_memory, switched
from perfledger.estimator.plan.pareto import pareto_front
from perfledger.estimator.plan.question import Question, resolve_version, role_quants
from perfledger.estimator.plan.space import Parallel, check_node_ep, enumerate_parallel, refusal_reason
from perfledger.estimator.plan.steps import decode_step, mixed_step
from perfledger.estimator.static import Deploy, check_deploy, under_flags
from perfledger.safe_io import data_yaml

AGG_YAML = Path(__file__).with_name("agg.yaml")
GIB = float(1 << 30)
# Columns of a result row (the issue's JSON names first); `_r` twins hold 0.12.0's 3-decimal values its selection uses.
ROW_COLUMNS = ["tokens_per_s_per_gpu", "tokens_per_s_per_user", "ttft_ms", "tpot_ms", "request_latency_ms",
               "concurrency", "batch", "tp", "pp", "dp", "moe_tp", "moe_ep", "cp", "gpus", "global_batch", "seq_per_s",
               "tokens_per_s", "ctx_tokens", "num_ctx_reqs", "num_gen_reqs", "memory_gib", "parallel"]


@cache
def rules(path: Path = AGG_YAML) -> dict:
    return data_yaml(path)


def _ranges(spec: list[list[int]]) -> list[int]:
    return [v for start, stop, step in spec for v in range(start, stop, step)]


def batch_sizes() -> list[int]:
    sweep = rules()["sweep"]
    return [b for b in _ranges(sweep["batches"]) if b <= sweep["max_batch"]]


def tpot_thresholds() -> list[int]:
    return _ranges(rules()["sweep"]["tpot_thresholds"])


def ctx_budgets(isl: int) -> list[int]:
    """Context tokens per step to sweep (no chunked prefill: multiples of isl), 0.12.0's list."""
    s = rules()["sweep"]
    normal = s["max_normal_ctx_tokens"]
    top = max(normal, isl * s["max_ctx_multiple_of_isl"])
    stride = max(isl, s["ctx_stride"], normal // s["small_search_steps"])
    large = max(1024, s["ctx_stride"], normal // s["small_search_steps"], top // s["large_search_steps"])
    large = ceil(large / isl) * isl
    out, t = [], 0
    while True:
        t += stride if t < normal else large
        if t > top:
            break
        out.append(t)
    out += [isl * i for i in range(1, s["max_ctx_multiple_of_isl"] + 1) if isl * i not in out]
    return sorted(out)


@dataclass(frozen=True)
class Schedule:
    """The step counts of one operating point (b requests, ctx context tokens per mixed step)."""

    mix_steps: int
    mix_gen: int  # decode requests in a mixed step
    decode_steps: float  # fractional under speculative progress
    decode_requests: int
    tpot_mix_steps: int
    ctx_steps: int  # mixed steps until every request has its context


def schedule(backend: dict, b: int, ctx: int, isl: int, osl: int, progress: float = 1.0) -> Schedule:
    """progress: output tokens a decode step commits per request (1 + accepted MTP drafts)."""
    steps = ceil(isl * b / ctx)
    iterations = 1 + max(osl - 1, 0) / progress
    if b == 1:
        return Schedule(1, 0, max(iterations - 1, 0), 1, 0, steps)
    if backend["gen_requests"] == "serial_prefill" or steps < iterations:
        gen = max(1, b - ceil(ctx / isl))
    else:
        gen = max(1, int(b // (steps / iterations)))
    if steps >= iterations:
        return Schedule(steps, gen, 0, 0, steps, steps)
    drain = backend["tpot_drain_steps"]
    return Schedule(steps, gen, iterations - steps, b, max(1, steps - drain) if drain else steps, steps)


def ttft_queue_factor(backend: dict, b: int, ctx_steps: int) -> float:
    if backend["ttft_queue"] == "log2":
        return 1.0 if b <= 1 else min(1.0 + log2(b) / 8.0, 2.0)
    return min(2 + (ctx_steps - 3) / 2 / 10, 4)


@dataclass(frozen=True)
class Point:
    parallel: Parallel
    batch: int
    ctx_tokens: int
    schedule: Schedule
    memory: Memory


def worker_memory(mm: MemoryModel, backend: dict, p: Parallel, b: int, ctx: int, isl: int, osl: int, nextn: int,
                  a2a: bool = False) -> Memory:
    """The footprint 0.12.0 checks for a point: the mixed step's activations (TRT-LLM: its max_num_tokens), and for
    a single request the larger of its context step and its decode steps (`a2a`: priced through the all-to-all)."""
    seq = isl + osl
    fixed = backend["activation_tokens"]
    if fixed != "step":
        return mm.worker(p, batch=b, seq_tokens=seq, tokens=int(fixed), nextn=nextn, a2a=a2a)
    if b > 1:
        gen = b - ceil(ctx / isl)
        return mm.worker(p, batch=b, seq_tokens=seq, tokens=gen + ctx, nextn=nextn, decode_tokens=gen, a2a=a2a)
    first = mm.worker(p, batch=1, seq_tokens=seq, tokens=ctx, nextn=nextn, decode_tokens=0, a2a=a2a)
    if osl <= 1:
        return first
    decode = mm.worker(p, batch=1, seq_tokens=seq, tokens=1, nextn=nextn, a2a=a2a)
    return max(first, decode, key=lambda m: m.total)


def sweep_points(mm: MemoryModel, backend: dict, p: Parallel, isl: int, osl: int, nextn: int,
                 progress: float = 1.0, batches: list[int] | None = None, a2a: bool = False
                 ) -> tuple[list[Point], bool, bool]:
    """The operating points of one configuration 0.12.0 evaluates, in its order: (points, some point fit the
    model, some point fit model and KV). A batch's larger context budgets are skipped after the first that does
    not fit; points whose decode share repeats an already seen balanced share are skipped (not under speculative
    progress, where 0.12.0 evaluates every point). `batches`: only these sizes (feasibility's batch-1 witness)."""
    budgets, capped, out = ctx_budgets(isl), [], []
    saw_model = saw_kv = False
    for b in batch_sizes() if batches is None else batches:
        for ctx in budgets:
            chunk = ceil(ctx / isl)
            if b - chunk < 0 or (b > 1 and b - chunk < 1):
                break
            balance = isl * b / ctx / osl
            if progress == 1.0 and balance > 1:
                gen = b // balance
                if gen > 1 and gen in capped:
                    continue
                capped.append(gen)
            memory = worker_memory(mm, backend, p, b, ctx, isl, osl, nextn, a2a)
            saw_model |= memory.fits
            saw_kv |= memory.fits and memory.kv_fits
            if not (memory.fits and memory.kv_fits):
                break
            out.append(Point(p, b, ctx, schedule(backend, b, ctx, isl, osl, progress), memory))
    return out, saw_model, saw_kv


def _price_or_miss(est, op_lists: list, spec, mode: str, tiers: list[set] | None, misses: list[str]
                   ) -> list[dict | None]:
    """price_many, and where a batch misses, each list alone (a point without data is skipped, not the search);
    `tiers` (one set per list) collects source tiers, `misses` the error of each list that missed."""
    try:
        return price_many(est, op_lists, spec, mode, tiers)
    except EstimatorError:
        out = []
        for i, ops in enumerate(op_lists):
            if tiers is not None:
                tiers[i].clear()
            try:
                out.append(price_many(est, [ops], spec, mode, None if tiers is None else [tiers[i]])[0])
            except EstimatorError as exc:
                out.append(None)
                misses.append(str(exc))
        return out


@dataclass
class AggPlan:
    """The agg answer: every SLA candidate (`candidates`, 0.12.0's sweep output), its Pareto front (`pareto`), the best
    point per configuration under the TPOT target (`top`, best first); `reason` says why `top` is empty."""

    question: Question
    candidates: pl.DataFrame
    pareto: pl.DataFrame
    top: pl.DataFrame
    warnings: list[str] = field(default_factory=list)
    reason: str | None = None
    steps: dict = field(default_factory=dict)  # (parallel label, batch, ctx_tokens) -> {"mixed", "decode"} op ms
    tiers: dict = field(default_factory=dict)  # with_tiers: the same keys -> source tiers of the point's ops
    misses: list[str] = field(default_factory=list)  # why step lists could not be priced (one message each)


def agg_search(est, q: Question, *, top_n: int | None = None, batches: list[int] | None = None,
               with_tiers: bool = False) -> AggPlan:
    """Answer the agg half of a planning question over `est`'s data (see the module docstring).

    batches: sweep only these batch sizes (plan/feasible.py's cheap witness); with_tiers: also record each point's
    op source tiers and the pricing misses (the support matrix grades a row by them)."""
    q = resolve_version(est.source, q)
    backend = rules()["backends"].get(q.backend)
    if backend is None:
        raise UnsupportedModelError(f"{AGG_YAML.name}: no agg scheduling rules for backend {q.backend!r}")
    config = resolve_model(q.model)
    quants = role_quants(est, config, q, context=True)
    m = under_flags(load_model(config), config.architecture, quants)
    labels = {role: v["quant"] for role, v in quants.items()}
    spec, mode = est.spec(q.system), q.database_mode
    base = Deploy(q.system, q.backend, q.version, nextn=q.nextn, sm_version=spec.sm_version,
                  **{f"{r}_quant": v for r, v in labels.items()})
    if m.family.get("backends") and q.backend not in m.family["backends"]:
        raise UnsupportedModelError(f"{config.name}: no layer plan for backend {q.backend}")
    warnings = [] if not q.nextn or q.nextn_accepted is not None else [
        f"nextn {q.nextn} without nextn_accepted: decode steps price nextn + 1 tokens and commit one token each"]
    warnings += [quants["fmha"]["note"]] if "note" in quants["fmha"] else []
    try:
        mm = memory_model(config, q.system, q.backend, q.version, quants)
    except MemoryModelError as exc:
        raise UnsupportedModelError(f"agg search needs the memory model: {exc}") from None
    points, deploys, refused, saw_model, saw_kv = [], {}, [], False, False
    for p in enumerate_parallel("agg", moe=bool(m.dims.experts), backend=q.backend, system=q.system,
                                total_gpus=q.total_gpus, context_parallel=prices_context_parallel(m, q.backend)):
        d = replace(base, tp=p.tp, pp=p.pp, attention_dp=p.dp, moe_tp=p.moe_tp, moe_ep=p.moe_ep, cp=p.cp)
        try:
            check_deploy(m, d, config)
            d = switched(est, m, d, PHASES, q.quants)
            check_node_ep(p, spec.num_gpus_per_node, bool(d.moe_a2a))
        except EstimatorError as exc:
            warnings.append(f"{p.label}: skipped ({exc})")
            refused.append(f"{p.label}: {exc}")
            continue
        deploys[p] = d
        sized = sized_memory(mm, m, d)
        found, fit_model, fit_kv = sweep_points(sized, backend, p, q.isl, q.osl, q.nextn, q.decode_progress, batches,
                                                bool(d.moe_a2a))
        points += found
        saw_model |= fit_model
        saw_kv |= fit_kv
    mixed_keys = sorted({(pt.parallel, pt.ctx_tokens, pt.schedule.mix_gen) for pt in points})
    decode_keys = sorted({(pt.parallel, pt.schedule.decode_requests) for pt in points if pt.schedule.decode_requests})
    lists = [mixed_step(m, deploys[p], ctx_tokens=c, gen_requests=g, isl=q.isl, osl=q.osl, prefix=q.prefix)
             for p, c, g in mixed_keys]
    lists += [decode_step(m, deploys[p], gen_requests=g, isl=q.isl, osl=q.osl) for p, g in decode_keys]
    tiers, misses = [set() for _ in lists] if with_tiers else None, []
    priced = _price_or_miss(est, lists, spec, mode, tiers, misses)
    mixed = dict(zip(mixed_keys, priced[:len(mixed_keys)], strict=True))
    decode = dict(zip(decode_keys, priced[len(mixed_keys):], strict=True))
    mixed_tiers = dict(zip(mixed_keys, tiers[:len(mixed_keys)], strict=True)) if tiers else {}
    decode_tiers = dict(zip(decode_keys, tiers[len(mixed_keys):], strict=True)) if tiers else {}
    rows, steps, point_tiers = [], {}, {}  # steps: the points priced
    for pt in points:
        s = pt.schedule
        mix_ops = mixed[(pt.parallel, pt.ctx_tokens, s.mix_gen)]
        dec_ops = decode.get((pt.parallel, s.decode_requests), {}) if s.decode_requests else {}
        if mix_ops is None or dec_ops is None:
            continue
        steps[(pt.parallel.label, pt.batch, pt.ctx_tokens)] = {"mixed": mix_ops, "decode": dec_ops}
        if with_tiers:
            point_tiers[(pt.parallel.label, pt.batch, pt.ctx_tokens)] = frozenset(
                mixed_tiers[(pt.parallel, pt.ctx_tokens, s.mix_gen)] | decode_tiers.get((pt.parallel, s.decode_requests), set()))
        row = _metrics(backend, m.dims.layers, q, pt, sum(mix_ops.values()), sum(dec_ops.values()))
        if row["ttft_ms"] <= q.ttft:
            rows.append(row)
    frame = pl.DataFrame(rows, schema=_schema()) if rows else pl.DataFrame(schema=_schema())
    plan = select(frame, q, top_n=top_n)
    plan.warnings, plan.steps, plan.tiers, plan.misses = warnings + plan.warnings, steps, point_tiers, misses
    if points and not steps:  # every operating point missed data: not an SLA verdict
        plan.reason = "missing data: no operating point could be priced" + (f" ({misses[0]})" if misses else "")
    elif not deploys and refused:
        plan.reason = refusal_reason("agg layout", refused)
    elif not points:
        plan.reason = ("does not fit: no configuration holds the model in GPU memory" if not saw_model else
                       "does not fit: the KV cache of even the smallest batch exceeds the memory budget" if not saw_kv
                       else "missing data: every point missed perf data")
    elif plan.top.is_empty() and plan.reason is None:
        plan.reason = f"SLA too tight: no point meets TTFT {q.ttft} ms and TPOT {q.tpot} ms"
    return plan


def _metrics(backend: dict, layers: int, q: Question, pt: Point, mix_ms: float, dec_ms: float) -> dict:
    p, s, b, isl, osl = pt.parallel, pt.schedule, pt.batch, q.isl, q.osl
    dispatch = layers * backend["dispatch_ms_per_layer"]
    ttft = (mix_ms * ceil(isl / pt.ctx_tokens) + dispatch) * ttft_queue_factor(backend, b, s.ctx_steps)
    tpot_steps = s.tpot_mix_steps + s.decode_steps
    tpot = (mix_ms * s.tpot_mix_steps + dec_ms * s.decode_steps) / tpot_steps / q.decode_progress if tpot_steps > 0 else 0.0
    total = s.mix_steps * mix_ms + s.decode_steps * dec_ms
    tput = 1000 / total * b * (osl - 1) if osl > 1 and total > 0 else 0.0
    latency = ttft + tpot * max(osl - 1, 0)
    if backend["littles_law_cap"] and latency > 0:
        tput = min(tput, b * max(osl - 1, 0) * 1000.0 / latency)
    tput *= p.pp * p.dp
    ctx_reqs = ceil(pt.ctx_tokens / isl) if b > 1 else 1
    return {"tokens_per_s_per_gpu": tput / p.gpus, "tokens_per_s_per_user": 1000.0 / tpot if osl > 1 and tpot > 0 else 0.0,
            "ttft_ms": ttft, "tpot_ms": tpot, "request_latency_ms": latency, "concurrency": b * p.pp * p.dp,
            "batch": b, **p.as_dict(), "gpus": p.gpus, "global_batch": b * p.dp,
            "seq_per_s": tput / (osl - 1) if osl > 1 else 0.0, "tokens_per_s": tput, "ctx_tokens": pt.ctx_tokens,
            "num_ctx_reqs": ctx_reqs, "num_gen_reqs": b - ctx_reqs if b > 1 else 1,
            "memory_gib": pt.memory.total / GIB, "parallel": p.label}


def _schema() -> dict:
    ints = {"concurrency", "batch", "tp", "pp", "dp", "moe_tp", "moe_ep", "cp", "gpus", "global_batch", "ctx_tokens",
            "num_ctx_reqs", "num_gen_reqs"}
    return {c: pl.String if c == "parallel" else pl.Int64 if c in ints else pl.Float64 for c in ROW_COLUMNS}


def select(frame: pl.DataFrame, q: Question, *, top_n: int | None = None) -> AggPlan:
    """0.12.0's selection over the TTFT-feasible points: candidates (per TPOT threshold, each configuration's top
    points by seq/s; deduplicated, best tokens/s/GPU first), the Pareto front over (tokens/s/user, cluster
    tokens/s/GPU) and the best point per configuration under the TPOT target. Ranking reads the 3-decimal values
    0.12.0 ranks (`*_r` columns dropped from the answer); reported values keep full precision."""
    sweep = rules()["sweep"]
    top_n = sweep["top_n"] if top_n is None else top_n
    r = frame.with_row_index("_order").with_columns(
        pl.col(c).round(3).alias(f"{c}_r") for c in ("seq_per_s", "tokens_per_s_per_gpu", "tokens_per_s_per_user", "tpot_ms"))
    picked: list[int] = []  # row orders, parallel-major, then threshold, then seq/s rank (0.12.0's concat order)
    tpot, seq = r["tpot_ms"].to_numpy(), r["seq_per_s_r"].to_numpy()
    parallel = r["parallel"].to_numpy()
    for label in r["parallel"].unique(maintain_order=True):
        rows = np.flatnonzero(parallel == label)
        ranked = rows[np.argsort(-seq[rows], kind="stable")]
        for threshold in tpot_thresholds():
            picked += ranked[tpot[ranked] <= threshold][:sweep["top_per_threshold"]].tolist()
    first = list(dict.fromkeys(picked))
    candidates = r[first] if first else r.clear()
    candidates = candidates.sort("tokens_per_s_per_gpu_r", descending=True, maintain_order=True)
    n = q.total_gpus
    candidates = candidates.with_columns(
        (pl.col("tokens_per_s_per_gpu_r") * (n // pl.col("gpus")) * pl.col("gpus") / n).alias("tokens_per_s_per_gpu_cluster"))
    pareto = pareto_front(candidates, "tokens_per_s_per_user_r", "tokens_per_s_per_gpu_cluster")
    meets = candidates.filter(pl.col("tpot_ms_r") <= q.tpot)
    top = (meets.sort("tokens_per_s_per_gpu_cluster", descending=True, maintain_order=True)
           .unique("parallel", keep="first", maintain_order=True)
           .sort(["tokens_per_s_per_gpu_cluster", "tokens_per_s_per_user_r"], descending=[True, True], maintain_order=True)
           .head(top_n))
    hidden = [c for c in r.columns if c.endswith("_r") or c == "_order"]
    return AggPlan(q, candidates.drop(hidden), pareto.drop(hidden), top.drop(hidden))


def best_steps(plan: AggPlan) -> dict | None:
    """The mixed / decode step breakdown (op -> ms) of the plan's best point, None when there is none."""
    if plan.top.is_empty():
        return None
    row = plan.top.row(0, named=True)
    return plan.steps.get((row["parallel"], row["batch"], row["ctx_tokens"]))

