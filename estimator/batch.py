"""Vectorised batch API: a polars frame of queries in, the same rows plus latency_ms/sol_ms/source out, and
energy_wms / power_w (W·ms, W: measured power as 0.12.0 reports it; null where no power column prices the row)."""

from __future__ import annotations

import numpy as np
import polars as pl

from perfledger.estimator.ops.base import TIERS, Queries
from perfledger.estimator.ops.registry import get_model
from perfledger.estimator.session import Estimator

_PEEL_MAX = 8  # slices peeled by equality masks before falling back to a group-by


def estimate(est: Estimator, op: str, queries: pl.DataFrame, *, mode: str = "silicon") -> pl.DataFrame:
    """Answer every row; a per-row `mode` column overrides `mode`.

    Rows are grouped by the op's slice keys (system, backend, version, quant, ...) and each slice is
    answered with array maths. Any miss raises the op's typed error naming the slice and the query.
    """
    model = get_model(op)
    absent = {c: v for c, v in model.defaults.items() if c not in queries.columns}
    if absent:
        queries = queries.with_columns(pl.lit(v).alias(c) for c, v in absent.items())
    # rows of mixed shapes (one query with an optional key, one without) hold nulls there: the default too
    partial = [c for c in model.defaults if c not in absent and queries[c].null_count()]
    if partial:
        queries = queries.with_columns(pl.col(c).fill_null(model.defaults[c]) for c in partial)
    needed = list(model.group_keys) + list(model.value_columns)
    missing = [c for c in needed if c not in queries.columns]
    if missing:
        raise ValueError(f"{op} queries lack column(s) {missing}; required: {needed}")
    fixed = dict(absent) if "mode" in queries.columns else {**absent, "mode": mode}
    groups = _slices(queries, [*model.group_keys, "mode"], fixed)
    values = {c: queries[c].to_numpy() for c in model.value_columns}

    def answer(slice_key: dict, rows):
        q = Queries(values if rows is None else {c: v[rows] for c, v in values.items()})
        key = {c: slice_key[c] for c in model.group_keys}
        return rows, model.evaluate(est, key, q, str(slice_key["mode"]).lower())

    if len(groups) == 1:
        _, ans = answer(groups[0][0], None)
        latency, sol, source, energy = ans.latency, ans.sol, ans.source, ans.energy
    else:
        latency, sol, energy = np.empty(queries.height), np.empty(queries.height), None
        source = np.zeros(queries.height, dtype=np.int8)
        for slice_key, rows in groups:
            _, ans = answer(slice_key, rows)
            latency[rows], sol[rows], source[rows] = ans.latency, ans.sol, ans.source
            if ans.energy is not None:
                energy = np.full(queries.height, np.nan) if energy is None else energy
                energy[rows] = ans.energy
    if len(source) and (source == source[0]).all():  # one tier (the usual case): no per-row gather
        labels = pl.lit(TIERS[source[0]], dtype=pl.String).alias("source")
    else:
        labels = pl.Series("source", TIERS, dtype=pl.String).gather(pl.Series(source).cast(pl.UInt32))
    # 0 W·ms is 0.12.0's "no power measured" (rows without power read 0 W): reported as null
    energy = np.full(queries.height, np.nan) if energy is None else np.where(energy > 0, energy, np.nan)
    power = np.divide(energy, latency, out=np.full(queries.height, np.nan), where=latency > 0)
    return queries.with_columns(pl.Series("latency_ms", latency), pl.Series("sol_ms", sol), labels,
                                pl.Series("energy_wms", energy, nan_to_null=True),
                                pl.Series("power_w", power, nan_to_null=True))


def _slices(frame: pl.DataFrame, keys: list[str], fixed: dict) -> list[tuple[dict, np.ndarray | None]]:
    """(slice key values, row indices) per distinct key combination, in first-appearance order.

    `fixed` keys take one value for every row (defaults, the call's mode) and are never materialised.
    Constant key columns (the usual system/backend/version) are set aside too, and a few slices are
    peeled off one equality mask at a time: hashing every row's keys in a group-by cost more than
    answering a big single-slice batch.
    """
    if not frame.height:
        return []
    const = {c: fixed[c] if c in fixed else frame[c][0] for c in keys if c in fixed or _constant(frame[c])}
    varying = [c for c in keys if c not in const]
    if not varying:
        return [(const, None)]
    taken = np.zeros(frame.height, dtype=bool)
    out = []
    while len(out) < _PEEL_MAX:
        first = int(np.argmin(taken))
        key = {c: const[c] if c in const else frame[c][first] for c in keys}
        mask = np.logical_and.reduce([_equals(frame[c], key[c]) for c in varying])
        if not mask[first]:  # a value unequal to itself (NaN): let the group-by decide
            break
        out.append((key, np.flatnonzero(mask)))
        taken |= mask
        if taken.all():
            return out
    grouped = frame.select(varying).with_row_index("_qrow").group_by(varying, maintain_order=True).agg(pl.col("_qrow"))
    return [({c: const[c] if c in const else grouped[c][i] for c in keys}, grouped["_qrow"][i].to_numpy())
            for i in range(grouped.height)]


def _constant(col: pl.Series) -> bool:
    return col.null_count() == 0 and col[0] == col[-1] and bool((col == col[0]).all())


def _equals(col: pl.Series, value) -> np.ndarray:
    """Row mask col == value, null matching null (Series.eq_missing goes through a lazy query: slower)."""
    if value is None:
        return col.is_null().to_numpy()
    eq = col == value
    return (eq.fill_null(False) if col.null_count() else eq).to_numpy()


def estimate_one(est: Estimator, family: str, /, *, mode: str = "silicon", **query) -> dict:
    """Single query = a one-row batch; returns {latency_ms, sol_ms, source, energy_wms, power_w}."""
    out = estimate(est, family, pl.DataFrame({k: [v] for k, v in query.items()}), mode=mode)
    row = out.row(0, named=True)
    return {c: row[c] for c in ("latency_ms", "sol_ms", "source", "energy_wms", "power_w")}
