"""Nearest collected GEMM sites for off-grid (n, k) queries, vectorised over queries.

Candidates are the sites whose m-curve covers the query m (all sites when none does; the caller
classes queries by candidate set), ranked by Euclidean distance in (log2 n, log2 k), ties broken by
the sites' table-walk rank; the NN_SITES nearest within MAX_SITE_DISTANCE octaves are kept, with the
single-axis frontier waiver.
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


class NeighbourStore:
    """Neighbour sets per (candidate class, shape), kept as columns of per-set arrays (set axis last).

    `derive(sites, dists)` turns fresh sets into the columns a caller needs (weights, coefficients...),
    so a batch gathers them straight to its queries. A set depends only on the shape and the candidate
    sites, and the site table is immutable: each is computed once, when its shape first shows up.
    """

    def __init__(self, ln, lk, rank, derive):
        self.ln, self.lk, self.rank, self.derive = ln, lk, rank, derive
        self.index: dict = {}  # class -> (sorted shape keys, column index of each)
        self.columns: tuple | None = None
        self.trees: dict = {}  # KD-tree per candidate set

    def rows(self, cls, cand, keys) -> np.ndarray:
        """Column index of each sorted unique shape key (n << 32 | k) among candidate sites `cand`."""
        known, ids = self.index.get(cls, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        pos = np.searchsorted(known, keys)
        if len(known) and (known[np.minimum(pos, len(known) - 1)] == keys).all():
            return ids[pos]
        fresh = keys[~np.isin(keys, known)]
        made = self.derive(*_pair_neighbours(self.ln, self.lk, self.rank, cand, fresh, self.trees))
        start = 0 if self.columns is None else self.columns[0].shape[-1]
        self.columns = made if self.columns is None else tuple(
            np.ascontiguousarray(np.concatenate([old, new], axis=-1)) for old, new in zip(self.columns, made, strict=True))
        known, ids = np.concatenate([known, fresh]), np.concatenate([ids, start + np.arange(len(fresh))])
        order = np.argsort(known, kind="stable")
        self.index[cls] = known[order], ids[order]
        return self.index[cls][1][np.searchsorted(self.index[cls][0], keys)]

    def gather(self, class_cands, pairs, pair_idx, cls) -> tuple:
        """Every column gathered to the queries (query axis last): query i has shape pairs[pair_idx[i]]
        and candidate class cls[i]; each distinct (shape, class) is looked up once."""
        ncls = len(class_cands)
        combo = pair_idx * ncls + cls
        if len(pairs) * ncls <= 4 * len(combo) + 65536:  # dense marks beat a sort
            seen = np.zeros(len(pairs) * ncls, dtype=bool)
            seen[combo] = True
            present = np.flatnonzero(seen)
            cinv = (np.cumsum(seen) - 1)[combo]
        else:
            present, cinv = np.unique(combo, return_inverse=True)
        rows = np.empty(len(present), dtype=np.int64)
        of = present % ncls
        for c in np.flatnonzero(np.bincount(of, minlength=ncls)):
            sel = np.flatnonzero(of == c)
            rows[sel] = self.rows(c, class_cands[c], pairs[present[sel] // ncls])
        qrow = rows[cinv]
        return tuple(np.take(col, qrow, axis=-1) for col in self.columns)
