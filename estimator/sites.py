"""GEMM SILICON: per-(n, k) m-curves ("sites"), linear in m, util-hold at the ends, IDW site transfer.

A site owns the m-curve measured at one (n, k). Queries at a collected site interpolate its curve;
queries elsewhere borrow util from the nearest sites in (log2 n, log2 k) within MAX_SITE_DISTANCE.
Everything is numpy over query arrays; per unique off-grid (n, k) there is one small distance sort.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from estimator.neighbours import find_neighbours
from estimator.sol import gemm_sol

K_TAIL = 3
_EPS = 1e-12
_SHIFT = np.int64(1) << np.int64(40)


@dataclass
class GemmSites:
    """One quant's GEMM table as sites. Arrays are sorted by (site, m); latencies clamped to SOL."""

    site_n: np.ndarray
    site_k: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    m: np.ndarray
    lat: np.ndarray
    util_low: np.ndarray
    util_high: np.ndarray
    rank: np.ndarray
    slope: np.ndarray
    sweeps: list
    site_sweep: np.ndarray
    memory: float
    flops: float
    bw: float
    trees: dict = field(default_factory=dict)  # KD-trees per candidate-site set, built on first use

    def sol(self, m, n, k):
        return gemm_sol(m, n, k, self.memory, self.flops, self.bw)[0]


def build_sites(m, n, k, lat, memory: float, flops: float, bw: float) -> GemmSites:
    """Group deduplicated rows, given in nested-walk order (m -> n -> k), into sites.

    Each latency is clamped up to its SOL; a site's tie-break rank is where the walk first meets it.
    """
    m, n, k = (np.asarray(a, dtype=np.int64) for a in (m, n, k))
    lat = np.asarray(lat, dtype=np.float64)
    key = n * _SHIFT + k
    _, first_idx = np.unique(key, return_index=True)
    walk_rank = np.empty(len(first_idx), dtype=np.int64)
    walk_rank[np.argsort(first_idx, kind="stable")] = np.arange(len(first_idx))
    order = np.lexsort((m, k, n))
    m, n, k, lat = m[order], n[order], k[order], lat[order]
    sol = gemm_sol(m, n, k, memory, flops, bw)[0]
    lat = np.maximum(lat, sol)
    new = np.ones(len(m), dtype=bool)
    new[1:] = (n[1:] != n[:-1]) | (k[1:] != k[:-1])
    start = np.flatnonzero(new)
    stop = np.append(start[1:], len(m))
    util = sol / lat
    util_low = np.array([np.median(util[a : min(a + K_TAIL, b)]) for a, b in zip(start, stop)])
    util_high = np.array([np.median(util[max(b - K_TAIL, a) : b]) for a, b in zip(start, stop)])
    mf = m.astype(np.float64)
    slope = np.zeros(len(m))
    step = ~new[1:]  # row i and i + 1 belong to the same site
    slope[:-1][step] = (lat[1:][step] - lat[:-1][step]) / (mf[1:][step] - mf[:-1][step])
    sweeps, site_sweep = _sweep_classes(mf, start, stop)
    return GemmSites(
        n[start], k[start], start, stop, mf, lat, util_low, util_high, walk_rank, slope, sweeps,
        site_sweep, memory, flops, bw,
    )


def _sweep_classes(m: np.ndarray, start: np.ndarray, stop: np.ndarray):
    """Distinct m sweeps (usually one or two) and each site's sweep index."""
    seen: dict[bytes, int] = {}
    sweeps, site_sweep = [], np.empty(len(start), dtype=np.int64)
    for i, (a, b) in enumerate(zip(start, stop)):
        key = m[a:b].tobytes()
        if key not in seen:
            seen[key] = len(sweeps)
            sweeps.append(m[a:b])
        site_sweep[i] = seen[key]
    return sweeps, site_sweep


def eval_sites(t: GemmSites, site, m) -> np.ndarray:
    """Latency of each site's curve at m: exact, linear in latency inside, util-hold outside.

    site is (q,) or (q, w) (w neighbour sites per query; -1 entries give unused values); m is (q,).
    """
    site = np.asarray(site, dtype=np.int64)
    m = np.asarray(m, dtype=np.float64)
    if site.ndim == 2:
        flat_m = np.broadcast_to(m[:, None], site.shape).ravel()
        return eval_sites(t, site.ravel(), flat_m).reshape(site.shape)
    site = np.maximum(site, 0)
    start, stop = t.start[site], t.stop[site]
    if len(t.sweeps) == 1:
        pos = start + np.searchsorted(t.sweeps[0], m, side="left")
    else:  # a few distinct m sweeps: one short binary search per sweep class
        pos = np.empty(len(site), dtype=np.int64)
        sweep = t.site_sweep[site]
        for c, grid in enumerate(t.sweeps):
            sel = sweep == c
            pos[sel] = start[sel] + np.searchsorted(grid, m[sel], side="left")
    idx = np.minimum(pos, stop - 1)
    exact = t.m[idx] == m
    lo = np.maximum(np.where(exact, idx, pos - 1), start)
    out = t.lat[lo] + t.slope[lo] * (m - t.m[lo])  # exact hits: slope * 0, the measured value verbatim
    if len(t.sweeps) == 1:
        hold = np.flatnonzero((m < t.sweeps[0][0]) | (m > t.sweeps[0][-1]))
    else:
        hold = np.flatnonzero((m < t.m[start]) | (m > t.m[stop - 1]))
    if len(hold):
        hs, hm = site[hold], m[hold]
        anchor = np.where(hm < t.m[start[hold]], t.util_low[hs], t.util_high[hs])
        out[hold] = t.sol(hm, t.site_n[hs], t.site_k[hs]) / anchor
    return out


def site_index(t: GemmSites, n, k) -> np.ndarray:
    """Index of the collected site at (n, k), -1 where none."""
    keys = t.site_n * _SHIFT + t.site_k
    q = np.asarray(n, dtype=np.int64) * _SHIFT + np.asarray(k, dtype=np.int64)
    pos = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
    return np.where(keys[pos] == q, pos, -1)


def silicon(t: GemmSites, m, n, k) -> tuple[np.ndarray, np.ndarray]:
    """Latency (ms) per query and a miss mask (True where no site can anchor the query)."""
    m = np.asarray(m, dtype=np.float64)
    n = np.asarray(n, dtype=np.int64)
    k = np.asarray(k, dtype=np.int64)
    out = np.full(len(m), np.nan)
    site = site_index(t, n, k)
    own = site >= 0
    if own.any():
        out[own] = eval_sites(t, site[own], m[own])
    off = np.flatnonzero(~own)
    if len(off):
        sites, dists = find_neighbours(
            t.site_n, t.site_k, t.rank, t.m[t.start], t.m[t.stop - 1], m[off], n[off], k[off], t.trees
        )
        valid = sites >= 0
        mo = m[off]
        lat_i = eval_sites(t, sites, mo)
        safe = np.maximum(sites, 0)
        u = t.sol(mo[:, None], t.site_n[safe], t.site_k[safe]) / lat_i
        w = np.where(valid, 1.0 / (np.where(valid, dists, 0.0) ** 2 + _EPS), 0.0)
        has = valid[:, 0]
        rows = off[has]
        blended = (w * np.where(valid, u, 0.0)).sum(axis=1)[has] / w.sum(axis=1)[has]
        out[rows] = t.sol(m[rows], n[rows], k[rows]) / blended
    return out, np.isnan(out)
