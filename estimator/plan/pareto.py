"""Pareto frontier of a candidate frame (both axes maximised), with 0.12.0's tie rules.

A point stays when no kept point is at least as good on both axes, so of several identical points none survives
but the first met in x order; the front comes back sorted by x. Used for the agg front here and the disagg front.
"""

from __future__ import annotations

import numpy as np
import polars as pl


def pareto_front(frame: pl.DataFrame, x: str, y: str) -> pl.DataFrame:
    """The rows of `frame` on the (x, y) frontier, sorted by x ascending."""
    rows = frame.filter(pl.col(x).is_finite() & pl.col(y).is_finite()).sort(x, maintain_order=True)
    if rows.is_empty():
        return rows
    costs = rows.select(x, y).to_numpy()
    keep = np.ones(len(costs), dtype=bool)
    for i, point in enumerate(costs):
        if keep[i]:
            keep[keep] = np.any(costs[keep] > point, axis=1)
            keep[i] = True
    return rows.filter(pl.Series(keep)).sort(x, maintain_order=True)
