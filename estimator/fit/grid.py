"""Multi-axis Grid interpolation (attention-type tables), per the method doc §4.2.

The table is descended in its own nesting order. An exact key collapses a level; otherwise the two
bracketing keys blend linearly in the coordinate (in sqrt(latency) on `sqrt_axes`, raw elsewhere).
If one bracket branch cannot answer (a ragged, corner-truncated table) the survivor is rescaled by
SOL(query)/SOL(snapped). Queries outside the data borrow util from the 4 nearest measured leaves in
joint log2 space with tapered modified-Shepard weights.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

NN_LEAVES = 4


@dataclass
class Grid:
    axes: tuple[str, ...]
    tree: dict
    sol: Callable[[dict], float]
    sqrt_axes: frozenset = frozenset()
    _leaves: tuple | None = field(default=None, repr=False)
    _keys: dict = field(default_factory=dict, repr=False)  # id(node) -> its sorted keys (the tree is never mutated)


def coordinate_grid(axes: tuple[str, ...], rows, sol, sqrt_axes=()) -> Grid:
    """rows: iterable of (coord tuple in `axes` order, latency), first occurrence wins."""
    tree: dict = {}
    for coords, lat in rows:
        node = tree
        for c in coords[:-1]:
            node = node.setdefault(c, {})
        node.setdefault(coords[-1], float(lat))
    return Grid(tuple(axes), tree, sol, frozenset(sqrt_axes))


def table_slice(est, system: str, backend: str, version: str, table: str, filters: dict, shared: bool = True):
    """Resolved rows of `table` matching every filters column == value; empty is a NoDataError naming both."""
    import polars as pl

    from perfledger.estimator.errors import NoDataError

    df = est.table(system, backend, version, table, shared=shared)
    for col, val in filters.items():
        df = df.filter(pl.col(col) == val)
    if not df.height:
        where = ", ".join(f"{k}={v}" for k, v in filters.items())
        raise NoDataError(f"no {table} rows for {system}/{backend}/{version} with {where}")
    return df


def rows_grid(rows, axes: tuple[str, ...], sol, sqrt_axes=()) -> Grid:
    """Grid over a frame's `axes` columns and its latency column (first row per coordinate wins)."""
    data = ((tuple(r[:-1]), r[-1]) for r in rows.select(*axes, "latency").iter_rows())
    return coordinate_grid(axes, data, sol, sqrt_axes)


def _descend(g: Grid, node, level: int, q: dict):
    axis = g.axes[level]
    x = q[axis]
    leaf = level == len(g.axes) - 1
    if x in node:
        return node[x] if leaf else _descend(g, node[x], level + 1, q)
    keys = g._keys.get(id(node))
    if keys is None:
        keys = g._keys[id(node)] = sorted(node)
    if x < keys[0] or x > keys[-1]:
        return None
    i = bisect.bisect_left(keys, x)
    lo, hi = keys[i - 1], keys[i]
    v_lo = node[lo] if leaf else _descend(g, node[lo], level + 1, q)
    v_hi = node[hi] if leaf else _descend(g, node[hi], level + 1, q)
    if v_lo is not None and v_hi is not None:
        t = (x - lo) / (hi - lo)
        if axis in g.sqrt_axes:
            return (math.sqrt(v_lo) + (math.sqrt(v_hi) - math.sqrt(v_lo)) * t) ** 2
        return v_lo + (v_hi - v_lo) * t
    if v_lo is None and v_hi is None:
        return None
    snapped, value = (lo, v_lo) if v_lo is not None else (hi, v_hi)
    return value * g.sol(q) / g.sol({**q, axis: snapped})


def _leaves(g: Grid):
    if g._leaves is None:
        coords, lats = [], []

        def walk(node, prefix):
            for key, val in node.items():
                if isinstance(val, dict):
                    walk(val, prefix + (key,))
                else:
                    coords.append(prefix + (key,))
                    lats.append(val)

        walk(g.tree, ())
        pts = np.log2(np.maximum(np.asarray(coords, dtype=np.float64), 1e-9))
        util = np.array([g.sol(dict(zip(g.axes, c, strict=True))) / lat if lat > 0 else 0.0
                         for c, lat in zip(coords, lats, strict=True)])
        ok = util > 0
        g._leaves = (pts[ok], util[ok])
    return g._leaves


def _nearest(d: np.ndarray, k: int) -> np.ndarray:
    """The first k of a stable argsort of d (ties by index), without sorting every leaf."""
    if len(d) <= k:
        return np.argsort(d, kind="stable")
    kth = np.partition(d, k - 1)[k - 1]
    within = np.flatnonzero(d <= kth)
    return within[np.argsort(d[within], kind="stable")][:k]


def _transfer(g: Grid, q: dict) -> float | None:
    pts, u = _leaves(g)
    if not len(u):
        return None
    qp = np.log2(np.maximum(np.array([q[a] for a in g.axes], dtype=np.float64), 1e-9))
    d = np.sqrt(((pts - qp) ** 2).sum(axis=1))
    order = _nearest(d, NN_LEAVES + 1)
    near, dn = order[:NN_LEAVES], d[order[:NN_LEAVES]]
    if len(order) > NN_LEAVES:
        r = d[order[NN_LEAVES]]
        w = ((r - dn) / (r * dn)) ** 2
    else:
        w = 1.0 / dn**2
    return g.sol(q) / (float((w * u[near]).sum()) / float(w.sum()))


def interpolate(g: Grid, q: dict) -> float | None:
    """In-data answer only (no transfer): None when the query leaves the collected grid."""
    return _descend(g, g.tree, 0, q)


def evaluate(g: Grid, q: dict) -> tuple[float | None, bool]:
    """(latency, transferred): in-data interpolation first, nearest-leaf util transfer otherwise."""
    value = interpolate(g, q)
    if value is not None:
        return value, False
    return _transfer(g, q), True
