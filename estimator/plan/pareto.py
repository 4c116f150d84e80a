"""Picking from a mode's feasible set: cluster throughput, the Pareto frontier, the top-N and the best.

Why: a replica of g GPUs fills a budget of N GPUs only ⌊N / g⌋ times, so configurations compete on the
throughput per GPU of the whole budget (`tokens_per_s_per_gpu_cluster`), not of one replica. The frontier is
tokens/s/GPU (cluster) against tokens/s/user; the top-N keeps the best configuration per parallel layout (of
the decode side for disagg) among those meeting the TPOT target, then ranks them by cluster throughput and
tokens/s/user. Orders and ties follow 0.12.0's picking (numpy quicksort on the frame as it sorts it, stable
multi-key sorts, first maximum per group).
"""

from __future__ import annotations

import numpy as np
import polars as pl

CLUSTER = "tokens_per_s_per_gpu_cluster"


def with_cluster(rows: pl.DataFrame, total_gpus: int) -> pl.DataFrame:
    """Add the budget-filling throughput per GPU and the replica count (⌊total / gpus⌋)."""
    replicas = total_gpus // rows["gpus"].to_numpy()
    tps = rows["tokens_per_s_per_gpu"].to_numpy()
    return rows.with_columns(pl.Series(CLUSTER, tps * replicas * rows["gpus"].to_numpy() / total_gpus),
                             pl.Series("replicas", replicas))


def _argsort_asc(values: np.ndarray, object_sort: bool) -> np.ndarray:
    return np.asarray(values, dtype=object if object_sort else float).argsort(kind="quicksort")


def frontier(rows: pl.DataFrame, *, object_sort: bool = False) -> pl.DataFrame:
    """The points no other point beats on both tokens/s/user and cluster tokens/s/GPU, by tokens/s/user.

    A point survives a kept point only when it is strictly higher on one axis, so of identical points the
    first in tokens/s/user order stays. object_sort: the rows come from a frame 0.12.0 sorts as objects."""
    if not rows.height:
        return rows
    x, y = rows["tokens_per_s_per_user"].to_numpy(), rows[CLUSTER].to_numpy()
    finite = np.flatnonzero(np.isfinite(x) & np.isfinite(y))
    order = finite[_argsort_asc(x[finite], object_sort)]
    costs = np.column_stack((x[order], y[order]))
    keep = np.ones(len(order), dtype=bool)
    for i in range(len(order)):
        if keep[i]:
            keep[keep] = (costs[keep] > costs[i]).any(axis=1)
            keep[i] = True
    front = order[keep]
    return rows[front[_argsort_asc(x[front], object_sort)]]


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
