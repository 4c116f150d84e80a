"""Vectorised batch API: a polars frame of queries in, the same rows plus latency_ms/sol_ms/source out."""

from __future__ import annotations

import numpy as np
import polars as pl

from estimator.context import Estimator
from estimator.ops import get_model
from estimator.ops.base import TIERS, Queries


def estimate(est: Estimator, op: str, queries: pl.DataFrame, *, mode: str = "silicon") -> pl.DataFrame:
    """Answer every row; a per-row `mode` column overrides `mode`.

    Rows are grouped by the op's slice keys (system, backend, version, quant, ...) and each slice is
    answered with array maths. Any miss raises the op's typed error naming the slice and the query.
    """
    model = get_model(op)
    absent = {c: v for c, v in model.defaults.items() if c not in queries.columns}
    if absent:
        queries = queries.with_columns(pl.lit(v).alias(c) for c, v in absent.items())
    needed = list(model.group_keys) + list(model.value_columns)
    missing = [c for c in needed if c not in queries.columns]
    if missing:
        raise ValueError(f"{op} queries lack column(s) {missing}; required: {needed}")
    frame = queries if "mode" in queries.columns else queries.with_columns(pl.lit(mode).alias("mode"))
    keys = [*model.group_keys, "mode"]
    groups = _slices(frame, keys)
    values = {c: frame[c].to_numpy() for c in model.value_columns}

    def answer(slice_key: dict, rows):
        q = Queries(values if rows is None else {c: v[rows] for c, v in values.items()})
        key = {c: slice_key[c] for c in model.group_keys}
        return rows, model.evaluate(est, key, q, str(slice_key["mode"]).lower())

    if len(groups) == 1:
        _, ans = answer(groups[0][0], None)
        latency, sol, source = ans.latency, ans.sol, ans.source
    else:
        latency, sol = np.empty(frame.height), np.empty(frame.height)
        source = np.zeros(frame.height, dtype=np.int8)
        for slice_key, rows in groups:
            _, ans = answer(slice_key, rows)
            latency[rows], sol[rows], source[rows] = ans.latency, ans.sol, ans.source
    labels = pl.Series("source", TIERS, dtype=pl.String).gather(pl.Series(source).cast(pl.UInt32))
    return queries.with_columns(pl.Series("latency_ms", latency), pl.Series("sol_ms", sol), labels)


def _slices(frame: pl.DataFrame, keys: list[str]) -> list[tuple[dict, np.ndarray | None]]:
    """(slice key values, row indices) per distinct key combination, in first-appearance order."""
    grouped = frame.select(keys).with_row_index("_qrow").group_by(keys, maintain_order=True).agg(pl.col("_qrow"))
    if grouped.height == 1:
        return [({c: grouped[c][0] for c in keys}, None)]
    return [({c: grouped[c][i] for c in keys}, grouped["_qrow"][i].to_numpy()) for i in range(grouped.height)]


def estimate_one(est: Estimator, family: str, /, *, mode: str = "silicon", **query) -> dict:
    """Single query = a one-row batch; returns {latency_ms, sol_ms, source}."""
    out = estimate(est, family, pl.DataFrame({k: [v] for k, v in query.items()}), mode=mode)
    row = out.row(0, named=True)
    return {"latency_ms": row["latency_ms"], "sol_ms": row["sol_ms"], "source": row["source"]}
