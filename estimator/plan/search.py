"""The search driver: one planning question through each serving mode, picked into top-N, frontier and best.

Why: the question a perf engineer asks is "how should I serve M on N GPUs under this SLA", answered across
modes. Each mode's search returns its feasible set (rows in the common columns below); here every mode gets
the cluster throughput, its Pareto frontier and its top-N (pareto.py), the overall best is the mode whose
first config has the highest cluster tokens/s/GPU (the first mode on a tie, as 0.12.0 picks), and a mode
that finds nothing says why: the SLA is too tight (with the closest value), nothing fits in memory, or data
is missing (named).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from perfledger.estimator.plan import disagg, pareto, workers
from perfledger.estimator.plan.agg import agg_search
from perfledger.estimator.plan.question import Question, resolve_version
from perfledger.estimator.plan.space import DIMS, refusal_reason
from perfledger.gc_pause import paused_gc

SIDES = {"prefill": "p", "decode": "d"}
SIDE_KEYS = ("workers", *DIMS, "batch")
TOTAL_KEYS = ("tokens_per_s_per_gpu", "tokens_per_s_per_gpu_cluster", "tokens_per_s_per_user", "ttft_ms", "tpot_ms",
              "request_latency_ms", "concurrency", "seq_per_s", "gpus", "replicas")


@dataclass(frozen=True)
class Feasible:
    """The disagg search's answer: its feasible rows, the decode layout label per row (top-N groups by it), why it is
    empty."""

    rows: pl.DataFrame
    layouts: list[str]
    reason: str | None = None
    warnings: tuple[str, ...] = ()
    pools: tuple[pl.DataFrame, ...] = ()  # with_tiers: the (prefill, decode) worker frames, with their `tiers`


@dataclass(frozen=True)
class ModeAnswer:
    mode: str
    top: list[dict]
    pareto: list[dict]
    reason: str | None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanAnswer:
    question: Question
    modes: dict[str, ModeAnswer]
    best: dict | None  # {"mode", ...row} of the winning mode's first config
    warnings: list[str] = field(default_factory=list)


def _misses(role: str, misses: workers.Misses) -> tuple[str, ...]:
    out = [f"disagg {role}: {note}" for note in misses.notes]
    if misses.no_data:
        out.append(f"disagg {role}: {len(misses.no_data)} layout(s) not priced: " + "; ".join(misses.no_data[:3])
                   + (" …" if len(misses.no_data) > 3 else ""))
    if misses.unfit:
        out.append(f"disagg {role}: {', '.join(misses.unfit)} do not fit in memory")
    if misses.refused:
        out.append(f"disagg {role}: {len(misses.refused)} layout(s) refused: " + "; ".join(misses.refused[:3])
                   + (" …" if len(misses.refused) > 3 else ""))
    return tuple(out)


def _empty_role(role: str, misses: workers.Misses) -> str:
    """Why a role has no worker: a refusal first (layouts that fit but are not priced by the plan), then missing data."""
    if misses.refused:
        return refusal_reason(f"{role} layout that fits", misses.refused)
    if misses.no_data:
        return f"no {role} worker can be priced (missing data): {misses.no_data[0]}"
    return f"does not fit: no {role} layout fits in memory at batch 1 ({', '.join(misses.unfit) or 'no layout'})"


def search_disagg(est, q: Question, *, decode_batches: list[int] | None = None, with_tiers: bool = False) -> Feasible:
    """The disagg feasible set of the question (disagg.py), with the reason when it is empty; `decode_batches` and
    `with_tiers` as workers.candidates takes them (plan/feasible.py's cheap witness); a question without a version
    reads the data's current one, as agg_search does."""
    q = resolve_version(est.source, q)
    prefill, p_miss = workers.candidates(est, q, "prefill", with_tiers=with_tiers)
    decode, d_miss = workers.candidates(est, q, "decode", batches=decode_batches, with_tiers=with_tiers)
    warnings = _misses("prefill", p_miss) + _misses("decode", d_miss)
    pools = (prefill, decode) if with_tiers else ()
    if not prefill.height or not decode.height:
        role, miss = ("prefill", p_miss) if not prefill.height else ("decode", d_miss)
        return Feasible(pl.DataFrame(), [], _empty_role(role, miss), warnings, pools)
    rows = disagg.replicas(prefill, decode, osl=q.osl, ttft=q.ttft, tpot_targets=disagg.tpot_sweep(), backend=q.backend,
                           total_gpus=q.total_gpus)
    if not rows.height:
        fastest = float(prefill["ttft_ms"].min()) * disagg.settings()["ttft_queue_factor"]
        reason = (f"too tight: TTFT {q.ttft:g} ms; the fastest prefill worker's queue-corrected TTFT is {fastest:.1f} ms"
                  if fastest >= q.ttft else "too tight: no prefill and decode pair forms a replica within "
                  f"{q.total_gpus} GPUs under the TPOT sweep")
        return Feasible(rows, [], reason, warnings, pools)
    side = rows.select(*(pl.col(f"d_{c}").alias(c) for c in DIMS))
    return Feasible(rows, disagg.parallel_key(side), None, warnings, pools)


def _row_json(mode: str, row: dict) -> dict:
    out = {k: row[k] for k in TOTAL_KEYS if k in row}
    out["total_gpus_used"] = int(row["gpus"]) * int(row["replicas"])
    if mode == "disagg":
        for side, prefix in SIDES.items():
            out[side] = {k: row[f"{prefix}_{k}"] for k in SIDE_KEYS}
    else:
        out.update({k: row[k] for k in ("batch", *DIMS) if k in row})
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in out.items()}


def answer_disagg(est, q: Question, top_n: int) -> ModeAnswer:
    """Cluster throughput, frontier and top-N of the disagg feasible set."""
    found = search_disagg(est, q)
    if not found.rows.height:
        return ModeAnswer("disagg", [], [], found.reason, found.warnings)
    rows = pareto.with_cluster(found.rows, q.total_gpus)
    # 0.12.0 sorts the disagg frame as objects (its concat starts from an empty frame): ties fall as they do there
    front = pareto.pareto_front(rows, "tokens_per_s_per_user", pareto.CLUSTER, object_order=True)
    top = pareto.top(rows, tpot_target=q.tpot, group=found.layouts, top_n=top_n)
    reason = None
    if not top.height:
        reason = f"too tight: TPOT {q.tpot:g} ms; the fastest disagg replica gives {float(rows['tpot_ms'].min()):.3f} ms"
    return ModeAnswer("disagg", [_row_json("disagg", r) for r in top.iter_rows(named=True)],
                      [_row_json("disagg", r) for r in front.iter_rows(named=True)], reason, found.warnings)


def answer_agg(est, q: Question, top_n: int) -> ModeAnswer:
    """The agg search (agg.py: it picks its own top-N and frontier) in the common row shape."""
    found = agg_search(est, q, top_n=top_n)

    def rows(frame: pl.DataFrame) -> list[dict]:
        if frame.is_empty():
            return []
        frame = frame.with_columns((q.total_gpus // pl.col("gpus")).alias("replicas"))
        return [_row_json("agg", r) for r in frame.iter_rows(named=True)]

    return ModeAnswer("agg", rows(found.top), rows(found.pareto), found.reason, tuple(found.warnings))


SEARCHES: dict[str, Callable[..., ModeAnswer]] = {"agg": answer_agg, "disagg": answer_disagg}


def plan(est, q: Question, modes: tuple[str, ...] = ("agg", "disagg"), top_n: int = 5,
         progress: Callable[[int, int], None] | None = None) -> PlanAnswer:
    """Answer the question in each of `modes` (in order: the first wins a tie for best); `progress(done, total)`
    is called with the modes searched so far; a question without a version reads the data's current one."""
    q = resolve_version(est.source, q)
    answers, warnings = {}, []
    with paused_gc():  # no reference cycles among the search's many small objects (perfledger/gc_pause.py)
        for done, mode in enumerate(modes):
            if progress is not None:
                progress(done, len(modes))
            answers[mode] = SEARCHES[mode](est, q, top_n)
            warnings += answers[mode].warnings
    if progress is not None:
        progress(len(modes), len(modes))
    return combine(q, answers, warnings)


def combine(q: Question, answers: dict[str, ModeAnswer], warnings: list[str]) -> PlanAnswer:
    """The answer over modes searched (in order: the first wins a tie): the best, and a warning per empty mode."""
    best = None
    for mode, a in answers.items():
        if a.top and (best is None or a.top[0][pareto.CLUSTER] > best[pareto.CLUSTER]):
            best = {"mode": mode, **a.top[0]}
    for mode, a in answers.items():
        if a.reason and best is not None:
            warnings.append(f"{mode}: {a.reason}")
    return PlanAnswer(q, answers, best, warnings)


def layout_label(mode: str, r: dict) -> str:
    """One row's layout in a line: `tp2 b64`, `tp4 etp1 ep4 b32`, `tp1 cp2 b20`, disagg `1P(tp2 b1) + 2D(tp4 b64)`."""
    def one(s):
        text = f"tp{s['tp']}" + (f" pp{s['pp']}" if s["pp"] > 1 else "") + (f" dp{s['dp']}" if s["dp"] > 1 else "")
        if s["moe_tp"] > 1 or s["moe_ep"] > 1:
            text += f" etp{s['moe_tp']} ep{s['moe_ep']}"
        text += f" cp{s['cp']}" if s.get("cp", 1) > 1 else ""
        return f"{text} b{s['batch']}"

    if mode == "disagg":
        p, d = r["prefill"], r["decode"]
        return f"{p['workers']}P({one(p)}) + {d['workers']}D({one(d)})"
    return one(r)


def as_json(answer: PlanAnswer) -> dict:
    """`perfledger plan --json`: best, per-mode top-N and frontier, warnings, and per-mode reasons when empty."""
    q = answer.question
    out = {"question": {"model": q.model if isinstance(q.model, str) else q.model.name, "system": q.system,
                        "backend": q.backend, "version": q.version, "total_gpus": q.total_gpus, "isl": q.isl,
                        "osl": q.osl, "prefix": q.prefix, "ttft_ms": q.ttft, "tpot_ms": q.tpot,
                        "database_mode": q.database_mode},
           "best": answer.best}
    for mode, a in answer.modes.items():
        out[mode] = a.top
        out[f"{mode}_pareto"] = a.pareto
    out["warnings"] = answer.warnings
    out["reasons"] = {mode: a.reason for mode, a in answer.modes.items() if a.reason and not a.top}
    return out
