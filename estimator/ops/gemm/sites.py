"""GEMM SILICON: per-(n, k) m-curves ("sites"), linear in m, util-hold at the ends, IDW site transfer.

A site owns the m-curve measured at one (n, k). Queries at a collected site interpolate its curve;
queries elsewhere borrow util from the nearest sites in (log2 n, log2 k) within 2 octaves.
Everything is numpy over query arrays. Every answer depends on m only through its "slot" (which
union-of-sweeps value it equals or falls between) and m itself, so the build precomputes per
(site, slot) the bracket row or util-hold side and per slot the candidate-site class; a query then
costs one slot lookup (a table for integer m) and gathers. Shapes are handled once per unique (n, k).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from itertools import pairwise

import numpy as np

from perfledger.estimator.fit.roofline import gemm_sol
from perfledger.estimator.ops.gemm.neighbours import NN_SITES, NeighbourStore

K_TAIL = 3
_EPS = 1e-12
_SHIFT = np.int64(1) << np.int64(32)
_CHUNK = 16384  # most queries per block in silicon()
_LUT_MAX = 1 << 20  # integer-m slot table bound (entries); larger sweeps fall back to a binary search
_BELOW, _ABOVE = -1, -2  # row_code values: util-hold at the site's first / last tail


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
    union_m: np.ndarray  # every m any site measured, sorted; slot = 2·(#union < m) + (m in union)
    row_code: np.ndarray  # (site * n_slots + slot) -> bracket row (largest own m <= m), or _BELOW / _ABOVE
    slot_class: np.ndarray  # slot -> index into class_cands
    class_cands: list  # candidate sites per class: those whose sweep covers m, or all when none does
    first_m: np.ndarray
    last_m: np.ndarray
    sol_coef: np.ndarray  # per site (a, b, c): SOL(m) = max(a·m, b·m + c) ms at the site's (n, k)
    memory: float
    flops: float
    bw: float
    cache: dict = field(default_factory=dict)  # neighbour store, integer-m slot table; built lazily
    power: np.ndarray | None = None  # measured W per row (a row without power: 0 W); None: the table holds none
    power_slope: np.ndarray | None = None
    power_low: np.ndarray | None = None  # per site: median power of its first / last K_TAIL rows (the hold value)
    power_high: np.ndarray | None = None

    @property
    def n_slots(self) -> int:
        return 2 * len(self.union_m) + 2

    def sol(self, m, n, k):
        return gemm_sol(m, n, k, self.memory, self.flops, self.bw)[0]


def _slot_tables(m, start, stop, first_m, last_m, union):
    """Per slot: a representative m, each site's bracket row / hold side there, and the candidate class."""
    w = len(union)
    mid = np.concatenate([[union[0] - 1.0], (union[:-1] + union[1:]) / 2.0, [union[-1] + 1.0]])
    rep = np.empty(2 * w + 2)
    rep[0::2], rep[1::2] = mid, np.append(union, np.nan)  # slot 2w + 1 (exact past the end) never occurs
    jp = np.clip(np.arange(2 * w + 2) // 2 - 1 + np.arange(2 * w + 2) % 2, 0, w - 1)
    code = np.empty((len(start), len(rep)), dtype=np.int64)
    for s, (a, b) in enumerate(zip(start, stop, strict=True)):
        code[s] = a + np.maximum(np.searchsorted(m[a:b], union[jp], side="right") - 1, 0)
    code[rep[None, :] > last_m[:, None]] = _ABOVE
    code[rep[None, :] < first_m[:, None]] = _BELOW
    classes: dict[bytes, int] = {}
    cands, slot_class = [], np.zeros(len(rep), dtype=np.int64)
    for i, r in enumerate(rep):
        cand = np.flatnonzero((first_m <= r) & (r <= last_m))
        if not len(cand):
            cand = np.arange(len(first_m))
        slot_class[i] = classes.setdefault(cand.tobytes(), len(cands))
        if slot_class[i] == len(cands):
            cands.append(cand)
    return code.ravel(), slot_class, cands


def _tail_median(util, lo, hi) -> np.ndarray:
    """np.median(util[lo:hi]) per site (windows of 1..K_TAIL rows), vectorised: the middle value, or the
    mean of the middle two; a window holding NaN gives NaN, as np.median does."""
    count = hi - lo
    pos = lo[:, None] + np.arange(K_TAIL)[None, :]
    win = np.where(pos < hi[:, None], util[np.minimum(pos, len(util) - 1)], np.inf)
    has_nan = np.isnan(win).any(axis=1)
    win.sort(axis=1)
    rows = np.arange(len(lo))
    upper, lower = win[rows, count // 2], win[rows, np.maximum((count - 1) // 2, 0)]
    return np.where(has_nan, np.nan, np.where(count % 2 == 1, upper, (lower + upper) / 2.0))


def build_sites(m, n, k, lat, memory: float, flops: float, bw: float, power=None) -> GemmSites:
    """Group deduplicated rows, given in nested-walk order (m -> n -> k), into sites; clamp to SOL. `power`: the
    rows' measured W (NaN: none), kept beside the latencies when any row holds it."""
    m, n, k = (np.asarray(a, dtype=np.int64) for a in (m, n, k))
    lat = np.asarray(lat, dtype=np.float64)
    power = None if power is None or np.isnan(np.asarray(power, dtype=np.float64)).all() else \
        np.nan_to_num(np.asarray(power, dtype=np.float64), nan=0.0)
    _, first_idx = np.unique(n * _SHIFT + k, return_index=True)
    walk_rank = np.empty(len(first_idx), dtype=np.int64)
    walk_rank[np.argsort(first_idx, kind="stable")] = np.arange(len(first_idx))
    order = np.lexsort((m, k, n))
    m, n, k, lat = m[order].astype(np.float64), n[order], k[order], lat[order]
    power = None if power is None else power[order]
    sol = gemm_sol(m, n, k, memory, flops, bw)[0]
    lat = np.maximum(lat, sol)
    new = np.ones(len(m), dtype=bool)
    new[1:] = (n[1:] != n[:-1]) | (k[1:] != k[:-1])
    start = np.flatnonzero(new)
    stop = np.append(start[1:], len(m))
    util = sol / lat
    util_low = _tail_median(util, start, np.minimum(start + K_TAIL, stop))
    util_high = _tail_median(util, np.maximum(stop - K_TAIL, start), stop)
    slope = np.zeros(len(m))
    inner = ~new[1:]
    slope[:-1][inner] = (lat[1:][inner] - lat[:-1][inner]) / (m[1:][inner] - m[:-1][inner])
    union = np.unique(m)
    first_m, last_m = m[start], m[stop - 1]
    code, slot_class, cands = _slot_tables(m, start, stop, first_m, last_m, union)
    sn, sk = n[start].astype(np.float64), k[start].astype(np.float64)
    coef = np.column_stack([2.0 * sn * sk / flops * 1000.0, memory * (sn + sk) / bw * 1000.0, memory * sn * sk / bw * 1000.0])
    sites = GemmSites(n[start], k[start], start, stop, m, lat, slope, util_low, util_high, walk_rank, union,
                      code, slot_class, cands, first_m, last_m, coef, memory, flops, bw)
    if power is not None:
        power_slope = np.zeros(len(m))
        power_slope[:-1][inner] = (power[1:][inner] - power[:-1][inner]) / (m[1:][inner] - m[:-1][inner])
        sites.power, sites.power_slope = power, power_slope
        sites.power_low = _tail_median(power, start, np.minimum(start + K_TAIL, stop))
        sites.power_high = _tail_median(power, np.maximum(stop - K_TAIL, start), stop)
    return sites


def query_slots(t: GemmSites, m) -> tuple[np.ndarray, np.ndarray]:
    """(slot, m as float64) per query: a table lookup for integer m, else a binary search over union_m."""
    m = np.asarray(m)
    u = t.union_m
    if m.dtype.kind in "iu" and u[0] >= 1 and u[-1] < _LUT_MAX:
        if "slot_lut" not in t.cache:  # x in [0, max + 1]: below u0, = u0, between, = u1, ..., above
            gaps = np.diff(np.concatenate([[-1.0], u])) - 1
            lengths = np.empty(2 * len(u) + 1, dtype=np.int64)
            lengths[0:-1:2], lengths[1::2], lengths[-1] = gaps, 1, 1
            t.cache["slot_lut"] = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
        lut = t.cache["slot_lut"]
        return lut[np.clip(m, 0, len(lut) - 1)], m.astype(np.float64)
    m = m.astype(np.float64)
    j = np.searchsorted(u, m, side="left")
    return 2 * j + (u[np.minimum(j, len(u) - 1)] == m), m


def _eval(t: GemmSites, base, m, slot) -> np.ndarray:
    """Latency of each site's curve at m: exact, linear in latency inside, util-hold outside.

    base = site · n_slots, (q,) or (w, q) (w neighbour sites per query, none negative); m, slot are (q,).
    """
    code = t.row_code[base + slot]
    lo = np.maximum(code, 0)
    out = t.m[lo]  # lat + slope * (m - m_lo) in place; exact hits: slope * 0, the measured value verbatim
    np.subtract(m, out, out=out)
    out *= t.slope[lo]
    out += t.lat[lo]
    hold = code < 0
    if hold.any():
        hs = base[hold] // t.n_slots
        hm = np.broadcast_to(m, base.shape)[hold]
        anchor = np.where(code[hold] == _BELOW, t.util_low[hs], t.util_high[hs])
        out[hold] = t.sol(hm, t.site_n[hs], t.site_k[hs]) / anchor
    return out


def _eval_power(t: GemmSites, base, m, slot) -> np.ndarray:
    """Measured power of each site's curve at m, as 0.12.0 reads it (probed): exact, linear inside, and outside the
    sweep the median power of the K_TAIL end rows (where latency holds util)."""
    code = t.row_code[base + slot]
    lo = np.maximum(code, 0)
    out = t.power[lo] + t.power_slope[lo] * (m - t.m[lo])
    hold = code < 0
    hs = base[hold] // t.n_slots
    out[hold] = np.where(code[hold] == _BELOW, t.power_low[hs], t.power_high[hs])
    return out


def silicon_power(t: GemmSites, m, n, k) -> np.ndarray | None:
    """Measured power (W) per query, None when the table holds none: a collected site's curve at m, elsewhere the
    mean of the neighbour sites' powers at m under the latency transfer's IDW weights (NaN without neighbours)."""
    if t.power is None:
        return None
    slot, m = query_slots(t, m)
    n, k = np.asarray(n, dtype=np.int64), np.asarray(k, dtype=np.int64)
    key = n * _SHIFT + k
    pairs, inv = np.unique(key, return_inverse=True)
    site = site_index(t, pairs // _SHIFT, pairs % _SHIFT)[inv]
    out = np.full(len(m), np.nan)
    own, off = np.flatnonzero(site >= 0), np.flatnonzero(site < 0)
    if len(own):
        out[own] = _eval_power(t, site[own] * t.n_slots, m[own], slot[own])
    if len(off):
        bases, pack, wsum, has = _neighbours(t, pairs, inv[off], slot[off])
        weighted = pack[0] * _eval_power(t, bases, np.broadcast_to(m[off], bases.shape), np.broadcast_to(slot[off], bases.shape))
        total = weighted[0].copy()
        for i in range(1, NN_SITES):
            total += weighted[i]
        with np.errstate(invalid="ignore"):
            total /= wsum
        out[off[has]] = total[has]
    return out


def eval_sites(t: GemmSites, site, m) -> np.ndarray:
    """Latency of each site's curve at m; site is (q,) or (q, w) (-1 entries give unused values), m is (q,)."""
    slot, m = query_slots(t, m)
    base = np.maximum(np.asarray(site, dtype=np.int64), 0) * t.n_slots
    return _eval(t, base, m, slot) if base.ndim == 1 else _eval(t, base.T, m, slot).T


def site_index(t: GemmSites, n, k) -> np.ndarray:
    """Index of the collected site at (n, k), -1 where none."""
    keys = t.site_n * _SHIFT + t.site_k
    q = np.asarray(n, dtype=np.int64) * _SHIFT + np.asarray(k, dtype=np.int64)
    pos = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
    return np.where(keys[pos] == q, pos, -1)


def _neighbours(t: GemmSites, pairs, pair_idx, slot):
    """Per query, neighbour-major (NN_SITES, q): site bases (unused ones: site 0, weight 0), a
    (4, NN_SITES, q) pack of IDW weight and SOL coefficients a, b, c, the weight sums (q,) and whether
    any neighbour exists."""
    if "nb" not in t.cache:
        ln, lk = np.log2(t.site_n.astype(np.float64)), np.log2(t.site_k.astype(np.float64))
        t.cache["nb"] = NeighbourStore(ln, lk, t.rank, partial(_idw_columns, t.sol_coef, t.n_slots))
    return t.cache["nb"].gather(t.class_cands, pairs, pair_idx, t.slot_class[slot])


def _idw_columns(sol_coef, n_slots, sites, dists):
    """Store columns for fresh neighbour sets: site bases (site · n_slots; unused slots site 0), the
    (weight, a, b, c) pack, weight sum, any neighbour."""
    weight = 1.0 / (dists**2 + _EPS)  # unused slots have dist inf: weight 0
    used = np.ascontiguousarray(np.maximum(sites, 0).T)
    pack = np.ascontiguousarray(np.stack([weight.T, *(sol_coef[:, i][used] for i in range(3))]))
    return used * n_slots, pack, weight.sum(axis=1), sites[:, 0] >= 0  # C order: fast gathers along the last axis


def silicon(t: GemmSites, m, n, k, sol=None) -> tuple[np.ndarray, np.ndarray]:
    """Latency (ms) per query and a miss mask (True where no site can anchor the query).

    `sol`: the queries' SOL under this table's roofline, when the caller already has it. Queries are
    answered in (n, k) order, so each shape is one run (no per-block sort) and its neighbours' rows are
    gathered together; big batches run in blocks of _CHUNK queries, whose temporaries stay small enough
    to be reused from the heap instead of faulting in fresh pages on every call.
    """
    slot, m = query_slots(t, m)
    n, k = np.asarray(n, dtype=np.int64), np.asarray(k, dtype=np.int64)
    sol = t.sol(m, n, k) if sol is None else np.asarray(sol)
    key = n * _SHIFT + k
    order = np.argsort(key)
    key, m, slot, sol = key[order], m[order], slot[order], sol[order]
    out = np.empty(len(m))
    bounds = np.linspace(0, len(m), -(-len(m) // _CHUNK) + 1).astype(np.int64)  # equal blocks
    for a, b in pairwise(bounds):
        out[order[a:b]] = _silicon(t, m[a:b], slot[a:b], key[a:b], sol[a:b])
    return out, np.isnan(out)


def _silicon(t: GemmSites, m, slot, key, sol) -> np.ndarray:
    """One block of queries sorted by shape key (n << 32 | k)."""
    new = np.ones(len(key), dtype=bool)
    np.not_equal(key[1:], key[:-1], out=new[1:])
    pairs = key[new]
    inv = np.cumsum(new) - 1
    site = site_index(t, pairs // _SHIFT, pairs % _SHIFT)
    base = np.where(site >= 0, site * t.n_slots, -1)[inv]
    out = np.full(len(m), np.nan)
    own = np.flatnonzero(base >= 0)
    off = np.flatnonzero(base < 0)
    if len(own):
        out[own] = _eval(t, base[own], m[own], slot[own])
    if len(off):
        mo, so = m[off], slot[off]
        bases, (weight, a, b, c), wsum, has = _neighbours(t, pairs, inv[off], so)
        a *= mo  # weight * max(a·m, b·m + c) / lat, in place on the gathered pack
        b *= mo
        b += c
        np.maximum(a, b, out=a)
        a /= _eval(t, bases, mo, so)
        a *= weight
        total = a[0].copy()
        for i in range(1, NN_SITES):  # the row sum, in numpy's order for a short axis
            total += a[i]
        with np.errstate(invalid="ignore"):  # rows without any neighbour are misses (0/0), masked next
            total /= wsum
        if not has.all():
            off, total = off[has], total[has]
        out[off] = sol[off] / total
    return out
