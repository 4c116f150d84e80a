"""UtilGrid: the EMPIRICAL util estimator over an op's own collected samples (method doc §5.1).

Coordinates go to log space, are min-max normalised per axis (queries clamped to [0, 1]); an exact
sample hit returns its util (first sample wins), otherwise the two nearest blend with 1/d weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_K_SEARCH = 8  # neighbours fetched from the KD-tree so equal-distance ties resolve by sample order


@dataclass
class UtilGrid:
    lo: np.ndarray
    span: np.ndarray
    points: np.ndarray
    util: np.ndarray
    tree: object


def build_util_grid(coords: np.ndarray, util: np.ndarray) -> UtilGrid | None:
    """coords: (samples, axes) raw coordinates in file order; util = SOL / latency. None when empty."""
    from scipy.spatial import cKDTree

    coords = np.asarray(coords, dtype=np.float64)
    util = np.asarray(util, dtype=np.float64)
    keep = np.isfinite(util) & (util > 0)
    coords, util = coords[keep], util[keep]
    if not len(util):
        return None
    logc = np.log(np.maximum(coords, 1e-9))
    lo = logc.min(axis=0)
    span = logc.max(axis=0) - lo
    span[span == 0] = 1.0
    points = (logc - lo) / span
    return UtilGrid(lo, span, points, util, cKDTree(points))


def query_util(grid: UtilGrid, coords: np.ndarray) -> np.ndarray:
    """Borrowed util per query row; exact hits return the sample's util verbatim."""
    q = (np.log(np.maximum(np.asarray(coords, dtype=np.float64), 1e-9)) - grid.lo) / grid.span
    q = np.clip(q, 0.0, 1.0)
    k = min(_K_SEARCH, len(grid.util))
    dist, idx = grid.tree.query(q, k=k)
    dist, idx = dist.reshape(len(q), k), idx.reshape(len(q), k)
    # exact Euclidean distances, then order by (distance, sample index) like a stable argsort
    dist = np.sqrt(((grid.points[idx] - q[:, None, :]) ** 2).sum(axis=2))
    order = np.lexsort((idx, dist), axis=-1)
    dist = np.take_along_axis(dist, order, axis=1)
    idx = np.take_along_axis(idx, order, axis=1)
    exact = dist[:, 0] == 0
    if k == 1:
        return grid.util[idx[:, 0]]
    w = 1.0 / np.where(exact[:, None], 1.0, dist[:, :2])
    blended = (w * grid.util[idx[:, :2]]).sum(axis=1) / w.sum(axis=1)
    return np.where(exact, grid.util[idx[:, 0]], blended)



def curve_estimate(sizes: np.ndarray, lats: np.ndarray, sol_slice, sol_query, x: np.ndarray) -> np.ndarray:
    """EMPIRICAL over one 1-D slice (comm message sizes): SOL_query(x) / util(x), util = SOL_slice / lat.

    sol_slice prices the slice's own samples and sol_query the query (they differ when a fan-out beyond
    the data borrows the boundary slice); raises ValueError when the slice holds no usable sample.
    """
    sizes = np.asarray(sizes, dtype=np.float64)
    grid = build_util_grid(sizes[:, None], sol_slice(sizes) / np.asarray(lats, dtype=np.float64))
    if grid is None:
        raise ValueError("empty util grid")
    x = np.asarray(x, dtype=np.float64)
    return sol_query(x) / query_util(grid, x[:, None])
