"""Nearest collected GEMM sites for off-grid (n, k) queries, vectorised over queries.

Candidates are the sites whose m-curve covers the query m (all sites when none does), ranked by
Euclidean distance in (log2 n, log2 k), ties broken by the sites' table-walk rank; the NN_SITES
nearest within MAX_SITE_DISTANCE octaves are kept, with the single-axis frontier waiver.
"""

from __future__ import annotations

import numpy as np

NN_SITES = 4
MAX_SITE_DISTANCE = 2.0
_SHIFT = np.int64(1) << np.int64(32)
_BRUTE_CELLS = 50_000
_FETCH = 8  # KD-tree neighbours fetched; ties reaching past them fall back to a full sort


def _frontier_admissible(ln, lk, qn, qk) -> np.ndarray:
    """Waive the gate when exactly one axis overflows every candidate, none underflows, the rest pass."""
    over = [qn > ln.max(), qk > lk.max()]
    under = [qn < ln.min(), qk < lk.min()]
    if sum(over) != 1 or any(under):
        return np.zeros(len(ln), dtype=bool)
    other = np.abs(lk - qk) if over[0] else np.abs(ln - qn)
    return other <= MAX_SITE_DISTANCE


def _brute(ln, lk, rank, cand, qn, qk):
    """Exact neighbour picks for one query point among `cand` (used for frontier and deep ties)."""
    d = np.sqrt((ln[cand] - qn) ** 2 + (lk[cand] - qk) ** 2)
    order = np.lexsort((rank[cand], d))
    cand, d = cand[order], d[order]
    ok = d <= MAX_SITE_DISTANCE
    if not ok.any():
        ok = _frontier_admissible(ln[cand], lk[cand], qn, qk)
    pick = cand[ok][:NN_SITES]
    return pick, d[ok][:NN_SITES]


def find_neighbours(site_n, site_k, rank, m_lo, m_hi, m, n, k, tree_cache: dict):
    """(sites, dists), each (queries, NN_SITES); site -1 / dist inf where fewer neighbours qualify."""
    ln, lk = np.log2(site_n.astype(np.float64)), np.log2(site_k.astype(np.float64))
    qn, qk = np.log2(n.astype(np.float64)), np.log2(k.astype(np.float64))
    sites = np.full((len(m), NN_SITES), -1, dtype=np.int64)
    dists = np.full((len(m), NN_SITES), np.inf)
    bps = np.unique(np.concatenate([m_lo, m_hi]))
    cls = np.searchsorted(bps, m, "left") * (len(bps) + 1) + np.searchsorted(bps, m, "right")
    for c in np.unique(cls):  # queries in one class see the same covering sites
        rows = np.flatnonzero(cls == c)
        mr = m[rows[0]]
        cand = np.flatnonzero((m_lo <= mr) & (mr <= m_hi))
        if not len(cand):
            cand = np.arange(len(site_n))
        pair_key, inv = np.unique(n[rows].astype(np.int64) * _SHIFT + k[rows], return_inverse=True)
        pairs = np.column_stack([pair_key // _SHIFT, pair_key % _SHIFT])
        pn, pk = np.log2(pairs[:, 0].astype(np.float64)), np.log2(pairs[:, 1].astype(np.float64))
        kk = min(_FETCH, len(cand))
        if len(pairs) * len(cand) <= _BRUTE_CELLS:  # small batch: full distance matrix, no tree
            full = (ln[cand][None, :] - pn[:, None]) ** 2 + (lk[cand][None, :] - pk[:, None]) ** 2
            idx = cand[np.argsort(full, axis=1, kind="stable")[:, :kk]]
        else:
            key = cand.tobytes()
            if key not in tree_cache:
                from scipy.spatial import cKDTree

                tree_cache[key] = cKDTree(np.column_stack([ln[cand], lk[cand]]))
            idx = cand[tree_cache[key].query(np.column_stack([pn, pk]), k=kk)[1].reshape(len(pairs), kk)]
        d = np.sqrt((ln[idx] - pn[:, None]) ** 2 + (lk[idx] - pk[:, None]) ** 2)
        order = np.lexsort((rank[idx], d), axis=-1)
        idx, d = np.take_along_axis(idx, order, -1), np.take_along_axis(d, order, -1)
        width = min(NN_SITES, kk)
        ps = np.where(d[:, :width] <= MAX_SITE_DISTANCE, idx[:, :width], -1)
        pd = np.where(ps >= 0, d[:, :width], np.inf)
        redo = ~(ps[:, 0] >= 0)
        if kk < len(cand):
            redo |= d[:, -1] <= d[:, width - 1]
        for p in np.flatnonzero(redo):
            pick, pdist = _brute(ln, lk, rank, cand, pn[p], pk[p])
            ps[p], pd[p] = -1, np.inf
            ps[p, : len(pick)], pd[p, : len(pick)] = pick, pdist
        sites[rows, :width] = ps[inv.ravel()]
        dists[rows, :width] = pd[inv.ravel()]
    return sites, dists
