"""Multi-axis Grid interpolation (attention-type tables), per the method doc §4.2.

The table is descended in its own nesting order. An exact key collapses a level; otherwise the two
bracketing keys blend linearly in the coordinate (in sqrt(latency) on `sqrt_axes`, raw elsewhere).
If one bracket branch cannot answer (a ragged, corner-truncated table) the survivor is rescaled by
SOL(query)/SOL(snapped). Queries outside the data borrow util from the 4 nearest measured leaves in
joint log2 space with tapered modified-Shepard weights.
A `direct` Grid (measured power, `power_grid`) blends its values linearly, keeps a ragged survivor unscaled and
outside the data averages the 4 nearest leaves' values themselves (0.12.0's rules, probed: in-data and outside;
the ragged rule not isolated in a probe, the random scans agree).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl

NN_LEAVES = 4


@dataclass
class Grid:
    axes: tuple[str, ...]
    tree: dict
    sol: Callable[[dict], float]
    sqrt_axes: frozenset = frozenset()
    direct: bool = False  # leaves are averaged as they are (power), not as util under the query's SOL
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


def power_grid(rows, axes: tuple[str, ...]) -> Grid | None:
    """Grid over a frame's measured `power` (W) at `axes`, first row per coordinate as `rows_grid`; None when no row
    holds power. A row without power (a donor version's) reads 0 W, as 0.12.0 reads it."""
    if "power" not in rows.columns or rows["power"].null_count() == rows.height:
        return None
    data = ((tuple(r[:-1]), r[-1]) for r in rows.select(*axes, pl.col("power").fill_null(0.0)).iter_rows())
    return replace(coordinate_grid(axes, data, lambda _: 1.0), direct=True)


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
        if axis in g.sqrt_axes:  # squared as m * m: numpy's ** 2 (the batched path's); C pow(m, 2) can differ by an ulp
            root = math.sqrt(v_lo) + (math.sqrt(v_hi) - math.sqrt(v_lo)) * t
            return root * root
        return v_lo + (v_hi - v_lo) * t
    if v_lo is None and v_hi is None:
        return None
    snapped, value = (lo, v_lo) if v_lo is not None else (hi, v_hi)
    return value * g.sol(q) / g.sol({**q, axis: snapped})


def _leaves(g: Grid, sol_many: Callable[[dict], np.ndarray] | None = None):
    """(log2 leaf coordinates, leaf utils -- or values for a direct Grid), built once per Grid. sol_many: the Grid's
    SOL over arrays (`evaluate_many`'s), one vectorised pass instead of a scalar SOL per leaf; the rooflines are
    float64 elementwise, so the utils are the same bit for bit."""
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
        if g.direct:
            g._leaves = (pts, np.asarray(lats, dtype=np.float64))
            return g._leaves
        lat = np.asarray(lats, dtype=np.float64)
        if sol_many is None:
            sol = np.array([g.sol(dict(zip(g.axes, c, strict=True))) for c in coords], dtype=np.float64)
        else:
            sol = np.asarray(sol_many({a: np.asarray([c[i] for c in coords]) for i, a in enumerate(g.axes)}),
                             dtype=np.float64)
        util = np.where(lat > 0, sol / np.where(lat > 0, lat, 1.0), 0.0)
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
    if not w.sum():  # the k + 1 nearest all equidistant: every weight 0, a miss (the batched path's NaN)
        return None
    mean = float((w * u[near]).sum()) / float(w.sum())
    return mean if g.direct else g.sol(q) / mean


def interpolate(g: Grid, q: dict) -> float | None:
    """In-data answer only (no transfer): None when the query leaves the collected grid."""
    return _descend(g, g.tree, 0, q)


def evaluate(g: Grid, q: dict) -> tuple[float | None, bool]:
    """(latency, transferred): in-data interpolation first, nearest-leaf util transfer otherwise."""
    value = interpolate(g, q)
    if value is not None:
        return value, False
    return _transfer(g, q), True


def evaluate_many(g: Grid, coords: dict[str, np.ndarray], sol_many: Callable[[dict], np.ndarray]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """`evaluate` over many queries at once: (latency, transferred) arrays, NaN where even the transfer has no leaf.

    coords: one array per axis (the values `evaluate` would get); sol_many: the Grid's SOL over such arrays. The
    arithmetic is `evaluate`'s, element by element (same blend, ragged rescale, nearest leaves and weights), so
    each answer equals the one-query answer bit for bit; queries sharing a node descend it together.
    """
    n = len(coords[g.axes[0]])
    values = _descend_many(g, g.tree, 0, coords, np.arange(n), sol_many)
    transferred = np.isnan(values)
    if transferred.any():
        values[transferred] = _transfer_many(g, {a: c[transferred] for a, c in coords.items()}, sol_many)
    return values, transferred


def _node_keys(g: Grid, node) -> np.ndarray:
    keys = g._keys.get(("array", id(node)))
    if keys is None:
        keys = g._keys[("array", id(node))] = np.array(sorted(node))
    return keys


def _descend_many(g: Grid, node, level: int, coords: dict, idx: np.ndarray, sol_many) -> np.ndarray:
    axis = g.axes[level]
    x = coords[axis][idx]
    leaf = level == len(g.axes) - 1
    keys = _node_keys(g, node)
    out = np.full(len(idx), np.nan)

    def below(key, rows):
        child = node[key.item()]
        return np.full(rows.sum(), child) if leaf else _descend_many(g, child, level + 1, coords, idx[rows], sol_many)

    pos = np.searchsorted(keys, x)
    exact = (pos < len(keys)) & (keys[np.minimum(pos, len(keys) - 1)] == x)
    for k in np.unique(pos[exact]):
        rows = exact & (pos == k)
        out[rows] = below(keys[k], rows)
    inside = ~exact & (x > keys[0]) & (x < keys[-1])
    for k in np.unique(pos[inside]):
        rows = inside & (pos == k)
        lo, hi = keys[k - 1], keys[k]
        v_lo, v_hi = below(lo, rows), below(hi, rows)
        t = (x[rows] - lo) / (hi - lo)
        if axis in g.sqrt_axes:
            blended = (np.sqrt(v_lo) + (np.sqrt(v_hi) - np.sqrt(v_lo)) * t) ** 2
        else:
            blended = v_lo + (v_hi - v_lo) * t
        one = np.flatnonzero(np.isnan(v_lo) != np.isnan(v_hi))
        if len(one):  # a ragged bracket: the surviving side rescaled by SOL(query) / SOL(query at its key)
            q = {a: c[idx[rows][one]] for a, c in coords.items()}
            lo_side = ~np.isnan(v_lo[one])
            snapped, value = np.where(lo_side, lo, hi), np.where(lo_side, v_lo[one], v_hi[one])
            blended[one] = value * sol_many(q) / sol_many({**q, axis: snapped})
        out[rows] = blended
    return out


def _distances(pts: np.ndarray, qp: np.ndarray) -> np.ndarray:
    """Euclidean distance of every query row to every leaf, (queries, leaves).

    The squares are added axis by axis, left to right: the order numpy's sum takes over so few axes (under 8), so
    each distance equals `_transfer`'s bit for bit, without the (queries, leaves, axes) temporary that made the
    batched transfer the search's hot spot.
    """
    total = (pts[None, :, 0] - qp[:, None, 0]) ** 2
    for axis in range(1, pts.shape[1]):
        total += (pts[None, :, axis] - qp[:, None, axis]) ** 2
    return np.sqrt(total)


# queries per block of the batched transfer: blocks of coordinate-sorted queries span a small box, so few leaves
# can be among any of their nearest (`_candidates`)
TRANSFER_BLOCK = 64


def _candidates(pts: np.ndarray, qp: np.ndarray, k: int) -> np.ndarray:
    """Indices (ascending) of the leaves that can be among the k nearest of any query in `qp`: a superset, so the
    nearest leaves, their ties and their index order are those of the full distance matrix.

    Every query lies in the block's bounding box, so its k-th nearest distance is at most the k-th smallest
    farthest-corner distance of a leaf to the box, and a leaf whose distance to the box exceeds that bound is
    never among its k nearest. The bound gets a 1e-9 relative margin for rounding."""
    lo, hi = qp.min(axis=0), qp.max(axis=0)
    outside = np.maximum(np.maximum(lo - pts, pts - hi), 0.0)
    farthest = np.maximum(np.abs(pts - lo), np.abs(pts - hi))
    bound = np.partition((farthest**2).sum(axis=1), k - 1)[k - 1]
    return np.flatnonzero((outside**2).sum(axis=1) <= bound * (1 + 1e-9))


def _transfer_many(g: Grid, coords: dict, sol_many) -> np.ndarray:
    pts, u = _leaves(g, sol_many)
    n = len(coords[g.axes[0]])
    if not len(u):
        return np.full(n, np.nan)
    qp = np.log2(np.maximum(np.column_stack([coords[a] for a in g.axes]).astype(np.float64), 1e-9))
    k = min(NN_LEAVES + 1, len(u))
    out = np.empty(n)
    by_place = np.lexsort(qp.T[::-1])
    for start in range(0, n, TRANSFER_BLOCK):
        rows = by_place[start:start + TRANSFER_BLOCK]
        cand = _candidates(pts, qp[rows], k)
        d = _distances(pts[cand], qp[rows])
        order = np.empty((len(d), k), dtype=np.int64)
        kth = np.partition(d, k - 1, axis=1)[:, k - 1]
        within = d <= kth[:, None]
        simple = within.sum(axis=1) == k
        if simple.any():  # exactly k candidates: order them by (distance, index), as a stable argsort does
            cols = np.nonzero(within[simple])[1].reshape(-1, k)
            rank = np.argsort(np.take_along_axis(d[simple], cols, axis=1), axis=1, kind="stable")
            order[simple] = np.take_along_axis(cols, rank, axis=1)
        for i in np.flatnonzero(~simple):  # distance ties at the k-th leaf
            order[i] = _nearest(d[i], k)
        near = order[:, :NN_LEAVES]
        dn = np.take_along_axis(d, near, axis=1)
        if len(u) > NN_LEAVES:
            r = np.take_along_axis(d, order[:, NN_LEAVES:NN_LEAVES + 1], axis=1)
            w = ((r - dn) / (r * dn)) ** 2
        else:
            w = 1.0 / dn**2
        with np.errstate(invalid="ignore"):  # every weight 0 (the k + 1 nearest equidistant): NaN, a miss
            mean = (w * u[cand][near]).sum(axis=1) / w.sum(axis=1)
        out[rows] = mean if g.direct else sol_many({a: c[rows] for a, c in coords.items()}) / mean
    return out
