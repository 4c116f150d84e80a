"""Pareto frontiers and picking from a mode's feasible set, with 0.12.0's orders and tie rules.

Why: a replica of g GPUs fills a budget of N GPUs only ⌊N / g⌋ times, so configurations compete on the
throughput per GPU of the whole budget (`tokens_per_s_per_gpu_cluster`), not of one replica. The frontier is
tokens/s/GPU (cluster) against tokens/s/user, both maximised: a point stays when no kept point is at least as
good on both axes, so of identical points only the first met in x order survives (which one depends on the
sort 0.12.0 applies: stable for the agg frame, numpy quicksort over objects for the disagg one). The top-N keeps
the best configuration per parallel layout (of the decode side for disagg) among those meeting the TPOT target,
ranked by cluster throughput then tokens/s/user (agg.py `select` picks agg's the same way).
"""

from __future__ import annotations

import numpy as np
import polars as pl

CLUSTER = "tokens_per_s_per_gpu_cluster"


def pareto_front(frame: pl.DataFrame, x: str, y: str, *, object_order: bool = False) -> pl.DataFrame:
    """The rows of `frame` on the (x, y) frontier, sorted by x ascending (stable, or as numpy sorts objects)."""
    rows = frame.filter(pl.col(x).is_finite() & pl.col(y).is_finite())
    if rows.is_empty():
        return rows
    rows = rows[_x_order(rows[x].to_numpy(), object_order)]
    costs = rows.select(x, y).to_numpy()
    keep = np.ones(len(costs), dtype=bool)
    for i, point in enumerate(costs):
        if keep[i]:
            keep[keep] = np.any(costs[keep] > point, axis=1)
            keep[i] = True
    rows = rows.filter(pl.Series(keep))
    return rows[_x_order(rows[x].to_numpy(), object_order)]


def _x_order(values: np.ndarray, object_order: bool) -> np.ndarray:
    if object_order:
        return np.asarray(values, dtype=object).argsort(kind="quicksort")
    return np.argsort(values, kind="stable")


def with_cluster(rows: pl.DataFrame, total_gpus: int) -> pl.DataFrame:
    """Add the budget-filling throughput per GPU and the replica count (⌊total / gpus⌋)."""
    replicas = total_gpus // rows["gpus"].to_numpy()
    tps = rows["tokens_per_s_per_gpu"].to_numpy()
    return rows.with_columns(pl.Series(CLUSTER, tps * replicas * rows["gpus"].to_numpy() / total_gpus),
                             pl.Series("replicas", replicas))


def top(rows: pl.DataFrame, *, tpot_target: float, group: list[str], top_n: int) -> pl.DataFrame:
    """The best row per parallel layout (`group`: one label per row) meeting TPOT, ranked; at most top_n."""
    ok = np.flatnonzero(rows["tpot_ms"].to_numpy() <= tpot_target)
    if not len(ok) or top_n < 1:
        return rows.clear()
    cluster = rows[CLUSTER].to_numpy()
    labels = np.array(group)
    best = []
    for label in sorted(set(labels[ok])):
        members = ok[labels[ok] == label]
        best.append(members[np.argmax(cluster[members])])
    best = np.array(best)
    ranked = best[np.lexsort((-rows["tokens_per_s_per_user"].to_numpy()[best], -cluster[best]))]
    return rows[ranked[:top_n]]
