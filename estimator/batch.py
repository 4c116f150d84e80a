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
    needed = list(model.group_keys) + list(model.value_columns)
    missing = [c for c in needed if c not in queries.columns]
    if missing:
        raise ValueError(f"{op} queries lack column(s) {missing}; required: {needed}")
    frame = queries if "mode" in queries.columns else queries.with_columns(pl.lit(mode).alias("mode"))
    keys = [*model.group_keys, "mode"]
    groups = frame.select(keys).with_row_index("_qrow").group_by(keys, maintain_order=True).agg(pl.col("_qrow"))
    values = {c: frame[c].to_numpy() for c in model.value_columns}
    latency = np.empty(frame.height)
    sol = np.empty(frame.height)
    source = np.zeros(frame.height, dtype=np.int8)
    single = groups.height == 1
    for group in groups.iter_rows(named=True):
        rows = None if single else np.asarray(group["_qrow"], dtype=np.int64)
        q = Queries(values if single else {c: v[rows] for c, v in values.items()})
        key = {c: group[c] for c in model.group_keys}
        ans = model.evaluate(est, key, q, str(group["mode"]).lower())
        if single:
            latency, sol, source = ans.latency, ans.sol, ans.source
        else:
            latency[rows], sol[rows], source[rows] = ans.latency, ans.sol, ans.source
    labels = pl.Series("source", TIERS, dtype=pl.String).gather(pl.Series(source, dtype=pl.UInt32))
    return queries.with_columns(pl.Series("latency_ms", latency), pl.Series("sol_ms", sol), labels)


def estimate_one(est: Estimator, family: str, /, *, mode: str = "silicon", **query) -> dict:
    """Single query = a one-row batch; returns {latency_ms, sol_ms, source}."""
    out = estimate(est, family, pl.DataFrame({k: [v] for k, v in query.items()}), mode=mode)
    row = out.row(0, named=True)
    return {"latency_ms": row["latency_ms"], "sol_ms": row["sol_ms"], "source": row["source"]}
