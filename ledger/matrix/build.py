"""Our own support matrix: model x system x backend x version x mode, priced by the estimator.

PASS when every op the model needs is priced from collected data (SILICON), HYBRID_PASS when some op
needs a transfer (Source = the weakest tier used), FAIL naming the missing op/slice, HW_INCOMPATIBLE
when the system lacks tensor cores for a dtype the model needs natively. Ops without an estimator model
(the spec's `matrix.lanes`) count as priced when the ledger cell of that lane holds rows.
"""

from __future__ import annotations

from itertools import product
from typing import Callable

import polars as pl

from ledger.matrix.rules import MatrixRules, load_rules
from ledger.specs import ModelSpec, OpNeed

Estimate = Callable[[str, pl.DataFrame, str], pl.DataFrame]  # (op, queries, mode) -> frame with `source`


def combinations(partitions: pl.DataFrame, spec: ModelSpec, rules: MatrixRules) -> list[tuple[str, str, str]]:
    """(system, backend, version) of the warehouse on the model's systems, for the matrix's backends."""
    keep = partitions.filter(pl.col("system").is_in(list(spec.systems)) & pl.col("backend").is_in(list(rules.backends)))
    return sorted(keep.select("system", "backend", "version").unique().iter_rows())


def hw_gap(spec: ModelSpec, system: str, flops: dict[str, float]) -> str | None:
    """The HW_INCOMPATIBLE reason, or None: every required dtype needs positive tensor-core FLOP/s."""
    missing = [d for d in spec.matrix.requires if not flops.get(d)]
    if not missing:
        return None
    return f"{system} has no {'/'.join(d.upper() for d in missing)} tensor cores, required by {spec.model}"


def need_queries(need: OpNeed, system: str, backend: str, version: str) -> pl.DataFrame:
    """The need's value grid (cross product) with its slice keys and the cell's system/backend/version."""
    cols = list(need.values)
    grid = pl.DataFrame([dict(zip(cols, combo)) for combo in product(*need.values.values())])
    return grid.with_columns(system=pl.lit(system), backend=pl.lit(backend), version=pl.lit(version),
                             **{k: pl.lit(v) for k, v in need.query.items()})


def weakest(tiers: list[str], order: tuple[str, ...]) -> str:
    """The least confident provenance tier among those used (rules' source_tiers order)."""
    rank = {t: i for i, t in enumerate(order)}
    return max(tiers, key=lambda t: rank.get(t, len(order)))


def price(estimate: Estimate, need: OpNeed, cell: tuple[str, str, str], order: tuple[str, ...]) -> tuple[str | None, str | None]:
    """(tier, None) when priced, (None, reason) when not: SILICON first, then HYBRID."""
    from estimator.errors import EstimatorError

    queries = need_queries(need, *cell)
    try:
        estimate(need.op, queries, "silicon")
        return "silicon", None
    except EstimatorError as exc:
        first = str(exc)
    try:
        out = estimate(need.op, queries, "hybrid")
    except EstimatorError as exc:
        second = str(exc)
        return None, f"{need.op}: {second if second.startswith(first) else f'{first}; hybrid: {second}'}"
    return weakest(out["source"].unique().to_list(), order), None


def lane_versions(spec: ModelSpec, lane_id: str, cell: tuple[str, str, str]) -> list[str]:
    """Versions whose rows can serve a lane need: the cell's own, then the lane's expected (pinned)
    versions of that backend on that system -- a family pinned to a branch build serves every version."""
    system, backend, version = cell
    pinned = [e.version for e in spec.lane(lane_id).expect if e.backend == backend and system in e.systems]
    return list(dict.fromkeys([version, *pinned]))


def judge(spec: ModelSpec, cell: tuple[str, str, str], estimate: Estimate, flops: dict[str, float],
          lane_rows: dict[tuple, int], rules: MatrixRules) -> tuple[str, str, str]:
    """(Status, ErrMsg, Source) of one system/backend/version."""
    system = cell[0]
    gap = hw_gap(spec, system, flops)
    if gap:
        return "HW_INCOMPATIBLE", gap, ""
    tiers, errors = [], []
    for need in spec.matrix.ops:
        tier, error = price(estimate, need, cell, rules.source_tiers)
        tiers.append(tier) if tier else errors.append(error)
    for lane_id in spec.matrix.lanes:
        versions = lane_versions(spec, lane_id, cell)
        if any(lane_rows.get((lane_id, system, cell[1], v), 0) > 0 for v in versions):
            tiers.append("silicon")
        else:
            errors.append(f"lane {lane_id} ({spec.lane(lane_id).table}): no collected rows for {system}/{cell[1]} "
                          f"at {', '.join(versions)}")
    if errors:
        return "FAIL", "; ".join(errors), ""
    tier = weakest(tiers, rules.source_tiers) if tiers else "silicon"
    return ("PASS", "", "silicon") if tier == "silicon" else ("HYBRID_PASS", "", tier)


def build_rows(spec: ModelSpec, cells: list[tuple[str, str, str]], estimate: Estimate,
               flops_by_system: dict[str, dict[str, float]], lane_rows: dict[tuple, int],
               rules: MatrixRules | None = None) -> pl.DataFrame:
    """Matrix rows (the 10 support-matrix columns), both modes for every combination."""
    rules = rules or load_rules()
    rows = []
    for cell in cells:
        status, err, source = judge(spec, cell, estimate, flops_by_system.get(cell[0], {}), lane_rows, rules)
        command = f"perfledger matrix build {spec.model} --system {cell[0]} --backend {cell[1]} --version {cell[2]}"
        for mode in rules.modes:
            rows.append(dict(zip(rules.columns, (spec.model, spec.architecture, *cell, mode, status, err, command, source))))
    return pl.DataFrame(rows, schema=dict.fromkeys(rules.columns, pl.String))
