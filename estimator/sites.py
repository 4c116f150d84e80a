"""GEMM SILICON: per-(n, k) m-curves ("sites"), linear in m, util-hold at the ends, IDW site transfer.

A site owns the m-curve measured at one (n, k). Queries at a collected site interpolate its curve;
queries elsewhere borrow util from the nearest sites in (log2 n, log2 k) within 2 octaves.
Everything is numpy over query arrays: one binary search per query over the union of the m sweeps,
then a precomputed (site, union position) -> bracket-row table; shapes are handled once per unique (n, k).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from estimator.neighbours import find_neighbours
from estimator.sol import gemm_sol

K_TAIL = 3
_EPS = 1e-12
_SHIFT = np.int64(1) << np.int64(32)


@dataclass
class GemmSites:
    """One quant's GEMM table as sites. Row arrays are sorted by (site, m); latencies clamped to SOL."""

    site_n: np.ndarray
    site_k: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    m: np.ndarray
    lat: np.ndarray
    slope: np.ndarray  # (lat[i+1] - lat[i]) / (m[i+1] - m[i]) inside a site, 0 on its last row
    util_low: np.ndarray
    util_high: np.ndarray
    rank: np.ndarray  # tie-break order: where the reference's m -> n -> k table walk meets the site
    union_m: np.ndarray  # every m any site measured, sorted
    bracket: np.ndarray  # (site * len(union_m) + j) -> row of the largest own m <= union_m[j]
    first_m: np.ndarray
    last_m: np.ndarray
    sol_coef: np.ndarray  # per site (a, b, c): SOL(m) = max(a·m, b·m + c) ms at the site's (n, k)
    memory: float
    flops: float
    bw: float
    trees: dict = field(default_factory=dict)  # neighbour index per candidate-site set, built lazily

    def sol(self, m, n, k):
        return gemm_sol(m, n, k, self.memory, self.flops, self.bw)[0]


def build_sites(m, n, k, lat, memory: float, flops: float, bw: float) -> GemmSites:
    """Group deduplicated rows, given in nested-walk order (m -> n -> k), into sites; clamp to SOL."""
    m, n, k = (np.asarray(a, dtype=np.int64) for a in (m, n, k))
    lat = np.asarray(lat, dtype=np.float64)
    _, first_idx = np.unique(n * _SHIFT + k, return_index=True)
    walk_rank = np.empty(len(first_idx), dtype=np.int64)
    walk_rank[np.argsort(first_idx, kind="stable")] = np.arange(len(first_idx))
    order = np.lexsort((m, k, n))
    m, n, k, lat = m[order].astype(np.float64), n[order], k[order], lat[order]
    sol = gemm_sol(m, n, k, memory, flops, bw)[0]
    lat = np.maximum(lat, sol)
    new = np.ones(len(m), dtype=bool)
    new[1:] = (n[1:] != n[:-1]) | (k[1:] != k[:-1])
    start = np.flatnonzero(new)
    stop = np.append(start[1:], len(m))
    util = sol / lat
    util_low = np.array([np.median(util[a : min(a + K_TAIL, b)]) for a, b in zip(start, stop)])
    util_high = np.array([np.median(util[max(b - K_TAIL, a) : b]) for a, b in zip(start, stop)])
    slope = np.zeros(len(m))
    inner = ~new[1:]
    slope[:-1][inner] = (lat[1:][inner] - lat[:-1][inner]) / (m[1:][inner] - m[:-1][inner])
    union = np.unique(m)
    bracket = np.empty((len(start), len(union)), dtype=np.int64)
    for s, (a, b) in enumerate(zip(start, stop)):
        bracket[s] = a + np.maximum(np.searchsorted(m[a:b], union, side="right") - 1, 0)
    sn, sk = n[start].astype(np.float64), k[start].astype(np.float64)
    coef = np.column_stack([2.0 * sn * sk / flops * 1000.0, memory * (sn + sk) / bw * 1000.0, memory * sn * sk / bw * 1000.0])
    return GemmSites(n[start], k[start], start, stop, m, lat, slope, util_low, util_high, walk_rank, union,
                     bracket.ravel(), m[start], m[stop - 1], coef, memory, flops, bw)


def eval_sites(t: GemmSites, site, m) -> np.ndarray:
    """Latency of each site's curve at m: exact, linear in latency inside, util-hold outside.

    site is (q,) or (q, w) (w neighbour sites per query; -1 entries give unused values); m is (q,).
    """
    site = np.maximum(np.asarray(site, dtype=np.int64), 0)
    m = np.asarray(m, dtype=np.float64)
    width = len(t.union_m)
    j = np.searchsorted(t.union_m, m, side="left")
    exact = t.union_m[np.minimum(j, width - 1)] == m
    jp = np.clip(np.where(exact, j, j - 1), 0, width - 1)
    if site.ndim == 2:
        jp, m = jp[:, None], m[:, None]
    lo = t.bracket[site * width + jp]
    out = t.lat[lo] + t.slope[lo] * (m - t.m[lo])  # exact hits: slope * 0, the measured value verbatim
    below, above = m < t.first_m[site], m > t.last_m[site]
    hold = below | above
    if hold.any():
        hs = site[hold]
        hm = np.broadcast_to(m, site.shape)[hold]
        anchor = np.where(below[hold], t.util_low[hs], t.util_high[hs])
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
    pairs, inv = np.unique(n * _SHIFT + k, return_inverse=True)
    inv = inv.ravel()
    site = site_index(t, pairs // _SHIFT, pairs % _SHIFT)[inv]
    out = np.full(len(m), np.nan)
    own = site >= 0
    out[own] = eval_sites(t, site[own], m[own])
    off = np.flatnonzero(~own)
    if len(off):
        mo = m[off]
        sites, dists = find_neighbours(t.site_n, t.site_k, t.rank, t.first_m, t.last_m, mo, pairs, inv[off], t.trees)
        lat_i = eval_sites(t, sites, mo)
        coef = t.sol_coef[np.maximum(sites, 0)]
        mc = mo[:, None]
        util = np.maximum(coef[..., 0] * mc, coef[..., 1] * mc + coef[..., 2]) / lat_i
        weight = 1.0 / (dists**2 + _EPS)  # unused slots have dist inf: weight 0
        with np.errstate(invalid="ignore"):  # rows without any neighbour are misses (0/0), masked next
            blended = (weight * util).sum(axis=1) / weight.sum(axis=1)
        has = sites[:, 0] >= 0
        rows = off[has]
        out[rows] = t.sol(m[rows], n[rows], k[rows]) / blended[has]
    return out, np.isnan(out)
