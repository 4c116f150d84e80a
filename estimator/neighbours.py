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


def _coverage_groups(m, m_lo, m_hi):
    """(query rows, candidate sites) per distinct candidate set: sites whose m sweep covers the query m,
    or every site when none does. Queries are first classed by their position among the sweep ends."""
    bps = np.unique(np.concatenate([m_lo, m_hi]))
    cls = np.searchsorted(bps, m, "left") * (len(bps) + 1) + np.searchsorted(bps, m, "right")
    present = np.flatnonzero(np.bincount(cls))
    group_of = np.zeros(present.max() + 1, dtype=np.int64)
    groups: dict[bytes, tuple[int, np.ndarray]] = {}
    for c in present:
        mr = m[np.argmax(cls == c)]
        cand = np.flatnonzero((m_lo <= mr) & (mr <= m_hi))
        if not len(cand):
            cand = np.arange(len(m_lo))
        group_of[c] = groups.setdefault(cand.tobytes(), (len(groups), cand))[0]
    if len(groups) == 1:
        yield np.arange(len(m)), next(iter(groups.values()))[1]
        return
    gid = group_of[cls]
    for g, cand in groups.values():
        yield np.flatnonzero(gid == g), cand


def _pair_neighbours(ln, lk, rank, cand, pair_key, tree_cache: dict):
    """(sites, dists), each (pairs, NN_SITES) padded with -1 / inf, for unique (n, k) keys among `cand`."""
    pn = np.log2((pair_key // _SHIFT).astype(np.float64))
    pk = np.log2((pair_key % _SHIFT).astype(np.float64))
    kk = min(_FETCH, len(cand))
    if len(pair_key) * len(cand) <= _BRUTE_CELLS:  # small batch: full distance matrix, no tree
        full = (ln[cand][None, :] - pn[:, None]) ** 2 + (lk[cand][None, :] - pk[:, None]) ** 2
        idx = cand[np.argsort(full, axis=1, kind="stable")[:, :kk]]
    else:
        key = ("tree", cand.tobytes())
        if key not in tree_cache:
            from scipy.spatial import cKDTree

            tree_cache[key] = cKDTree(np.column_stack([ln[cand], lk[cand]]))
        idx = cand[tree_cache[key].query(np.column_stack([pn, pk]), k=kk)[1].reshape(len(pair_key), kk)]
    d = np.sqrt((ln[idx] - pn[:, None]) ** 2 + (lk[idx] - pk[:, None]) ** 2)
    order = np.lexsort((rank[idx], d), axis=-1)
    idx, d = np.take_along_axis(idx, order, -1), np.take_along_axis(d, order, -1)
    width = min(NN_SITES, kk)
    ps = np.full((len(pair_key), NN_SITES), -1, dtype=np.int64)
    pd = np.full((len(pair_key), NN_SITES), np.inf)
    ps[:, :width] = np.where(d[:, :width] <= MAX_SITE_DISTANCE, idx[:, :width], -1)
    pd[:, :width] = np.where(ps[:, :width] >= 0, d[:, :width], np.inf)
    redo = ps[:, 0] < 0
    if kk < len(cand):
        redo |= d[:, -1] <= d[:, width - 1]
    for p in np.flatnonzero(redo):
        pick, pdist = _brute(ln, lk, rank, cand, pn[p], pk[p])
        ps[p], pd[p] = -1, np.inf
        ps[p, : len(pick)], pd[p, : len(pick)] = pick, pdist
    return ps, pd


def find_neighbours(site_n, site_k, rank, m_lo, m_hi, m, pairs, pair_idx, tree_cache: dict):
    """(sites, dists), each (queries, NN_SITES); site -1 / dist inf where fewer neighbours qualify.

    pairs: unique query shapes as n << 32 | k; pair_idx: each query's index into pairs. Neighbour sets
    depend only on the shape and the candidate set, so they are kept in `tree_cache` (an index over
    the immutable site table) and computed once per new shape.
    """
    ln, lk = np.log2(site_n.astype(np.float64)), np.log2(site_k.astype(np.float64))
    sites = np.full((len(m), NN_SITES), -1, dtype=np.int64)
    dists = np.full((len(m), NN_SITES), np.inf)
    for rows, cand in _coverage_groups(m, m_lo, m_hi):  # queries in a group see the same candidate sites
        used, inv = np.unique(pair_idx[rows], return_inverse=True)
        pair_key = pairs[used]
        empty = [np.zeros(0, np.int64), np.zeros((0, NN_SITES), np.int64), np.zeros((0, NN_SITES))]
        known = tree_cache.setdefault(("nn", cand.tobytes()), empty)
        pos = np.searchsorted(known[0], pair_key)
        found = np.zeros(len(pair_key), dtype=bool)
        if len(known[0]):
            found = known[0][np.minimum(pos, len(known[0]) - 1)] == pair_key
        if not found.all():
            fresh = pair_key[~found]
            ps, pd = _pair_neighbours(ln, lk, rank, cand, fresh, tree_cache)
            keys = np.concatenate([known[0], fresh])
            order = np.argsort(keys, kind="stable")
            known[:] = [keys[order], np.concatenate([known[1], ps])[order], np.concatenate([known[2], pd])[order]]
            pos = np.searchsorted(known[0], pair_key)
        at = pos[inv.ravel()]
        sites[rows], dists[rows] = known[1][at], known[2][at]
    return sites, dists
