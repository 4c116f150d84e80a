"""Feasibility: does a planning question have any deployment meeting its SLA, and from which data tiers.

Why: a support-matrix row asks only whether the search finds a deployment on the row's GPU budget (0.12.0's
support check runs `cli default --top-n 1` and reads whether a result came back), not which one is best. The
full search prices every batch size and context budget of every configuration; feasibility first prices a
cheap witness per configuration -- the batch-1 agg point, batch-1 decode workers (prefill workers are batch 1
anyway) -- in one batch call per op kind. Batch 1 is a configuration's smallest footprint and TPOT, so a
witness meeting the SLA settles the row; when the witnesses are priced but none meets the SLA, the full
search decides (exact); when none can be priced, the answer names the first missing data (a batch-1 point
without data is taken to mean the configuration has none: slices are keyed by shape and quant, not batch).
A search that refuses the model (a typed UnsupportedModelError: an architecture the agg step model does not
price yet) is answered `refused` with its message, so the row becomes decidable once the search prices it.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from perfledger.estimator.errors import EstimatorError, NoDataError, UnsupportedModelError
from perfledger.estimator.plan import agg
from perfledger.estimator.plan.question import Question
from perfledger.estimator.plan.search import search_disagg
from perfledger.estimator.plan.space import DIMS

WITNESS_BATCHES = [1]
KINDS = ("refused", "unfit", "missing_data", "too_tight")  # why nothing was found
LAYOUT = (*DIMS, "batch")


@dataclass(frozen=True)
class Feasibility:
    """One mode's answer: `found` with the witness (`deployment`) and its op source tiers, else `kind` + `reason`."""

    mode: str
    found: bool
    tiers: frozenset[str] = frozenset()
    deployment: str = ""
    kind: str | None = None
    reason: str | None = None
    full_search: bool = False  # the witnesses did not settle it: the full search ran


def _kind(reason: str | None) -> str:
    text = (reason or "").lower()
    if text.startswith("refused"):
        return "refused"
    if text.startswith("does not fit"):
        return "unfit"
    if "missing data" in text or "not priced" in text:
        return "missing_data"
    return "too_tight"


def agg_feasible(est, q: Question) -> Feasibility:
    """The agg mode: batch-1 witnesses, else the full agg search."""
    try:
        plan = agg.agg_search(est, q, top_n=1, batches=WITNESS_BATCHES, with_tiers=True)
        full = False
        if plan.top.is_empty() and plan.steps:  # witnesses priced, none meets the SLA: the full sweep decides
            plan, full = agg.agg_search(est, q, top_n=1, with_tiers=True), True
    except UnsupportedModelError as exc:
        return Feasibility("agg", False, kind="refused", reason=str(exc))
    except NoDataError as exc:
        return Feasibility("agg", False, kind="missing_data", reason=str(exc))
    if not plan.top.is_empty():
        row = plan.top.row(0, named=True)
        tiers = plan.tiers.get((row["parallel"], row["batch"], row["ctx_tokens"]), frozenset())
        return Feasibility("agg", True, frozenset(tiers), f"{row['parallel']} b{row['batch']}", full_search=full)
    if not plan.steps and plan.misses:
        return Feasibility("agg", False, kind="missing_data", reason=f"missing data: {plan.misses[0]}", full_search=full)
    return Feasibility("agg", False, kind=_kind(plan.reason), reason=plan.reason, full_search=full)


def _worker_tiers(workers: pl.DataFrame, row: dict, side: str) -> set[str]:
    match = workers.filter(*(pl.col(c) == row[f"{side}_{c}"] for c in LAYOUT))
    return {t for joined in match["tiers"].to_list() for t in joined.split(",") if t} if "tiers" in match.columns else set()


def _cp(cp: int) -> str:
    return f" cp{cp}" if cp > 1 else ""


def disagg_feasible(est, q: Question) -> Feasibility:
    """The disagg mode: batch-1 decode workers, else the full disagg search."""
    def attempt(batches):
        found = search_disagg(est, q, decode_batches=batches, with_tiers=True)
        rows = found.rows.filter(pl.col("tpot_ms") <= q.tpot) if found.rows.height else found.rows
        return found, rows

    try:
        found, rows = attempt(WITNESS_BATCHES)
        full = False
        if not rows.height and found.reason is not None and _kind(found.reason) == "too_tight":
            (found, rows), full = attempt(None), True
    except UnsupportedModelError as exc:
        return Feasibility("disagg", False, kind="refused", reason=str(exc))
    except NoDataError as exc:
        return Feasibility("disagg", False, kind="missing_data", reason=str(exc))
    if not rows.height:
        reason = found.reason or f"too tight: no disagg replica meets TPOT {q.tpot:g} ms"
        return Feasibility("disagg", False, kind=_kind(reason), reason=reason, full_search=full)
    best = rows.row(0, named=True)
    prefill, decode = found.pools  # the replica rows carry the workers' layouts; their tiers are in the pools
    tiers = _worker_tiers(prefill, best, "p") | _worker_tiers(decode, best, "d")
    label = " + ".join(f"{int(best[f'{s}_workers'])}{s.upper()}(tp{best[f'{s}_tp']} dp{best[f'{s}_dp']} "
                       f"ep{best[f'{s}_moe_ep']}{_cp(best[f'{s}_cp'])} b{best[f'{s}_batch']})" for s in ("p", "d"))
    return Feasibility("disagg", True, frozenset(tiers), label, full_search=full)


FEASIBLE = {"agg": agg_feasible, "disagg": disagg_feasible}


def feasible(est, q: Question, mode: str) -> Feasibility:
    """Whether `q` has a deployment in `mode` (agg | disagg) under its database mode; an estimator error the search
    does not absorb is a missing-data answer naming it."""
    if mode not in FEASIBLE:
        raise ValueError(f"mode {mode!r}: one of {', '.join(FEASIBLE)}")
    try:
        return FEASIBLE[mode](est, q)
    except EstimatorError as exc:
        return Feasibility(mode, False, kind="missing_data", reason=f"{type(exc).__name__}: {exc}")
