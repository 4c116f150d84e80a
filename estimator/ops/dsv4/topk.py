"""CSA top-k DELTA calibration (dsv4_csa_topk_calib_perf), as 0.12.0 subtracts it from the CSA module rows.

The CSA module collector runs top-k on degenerate (flat) scores; the calibration table times the selector
under flat and representative (top_last) scores per (prefix, isl, batch), per native head count and
selector variant (context v1, decode v2). DELTA = max(0, flat − top_last). An exact shape takes its own
DELTA; otherwise prefix is interpolated first at each (isl, batch), then isl at each batch, then batch —
each a linear interpolation between the neighbours holding the nearest value beyond the ends. No table,
or no pair for the variant: DELTA 0.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from perfledger.estimator.errors import NoDataError

TABLE = "dsv4_csa_topk_calib_perf"


def _lerp_points(points: dict[int, float], x: int) -> float | None:
    """Linear between neighbours, nearest value beyond the ends (None without points)."""
    if not points:
        return None
    if x in points:
        return points[x]
    xs = sorted(points)
    if x <= xs[0]:
        return points[xs[0]]
    if x >= xs[-1]:
        return points[xs[-1]]
    j = int(np.searchsorted(xs, x))
    lo, hi = xs[j - 1], xs[j]
    t = (x - lo) / (hi - lo)
    return points[lo] * (1.0 - t) + points[hi] * t


def deltas(est, system: str, backend: str, version: str, native_heads: int, variant: str) -> dict | None:
    """{(prefix, isl, batch): DELTA} for one native head count and selector variant (None: no calibration)."""
    def build():
        try:
            rows = est.table(system, backend, version, TABLE, shared=True)
        except NoDataError:
            return None
        rows = rows.filter((pl.col("num_heads") * pl.col("tp_size")) == native_heads)
        pairs = {}
        for mode in ("flat", "top_last"):
            sel = rows.filter(pl.col("score_mode") == f"{variant}_{mode}")
            pairs[mode] = {(int(p), int(i), int(b)): float(v)
                           for p, i, b, v in sel.select("step", "isl", "batch_size", "latency").iter_rows()}
        out = {k: max(0.0, v - pairs["top_last"][k]) for k, v in pairs["flat"].items() if k in pairs["top_last"]}
        return out or None

    return est.memo(("dsv4_topk", system, backend, version, native_heads, variant), build)


def delta_ms(table: dict | None, prefix: int, isl: int, batch: int) -> float:
    """The DELTA (ms) to subtract at one shape: exact, else prefix → isl → batch interpolation."""
    if not table:
        return 0.0
    if (v := table.get((prefix, isl, batch))) is not None:
        return v
    by_batch: dict[int, dict[int, dict[int, float]]] = {}
    for (p, i, b), v in table.items():
        by_batch.setdefault(b, {}).setdefault(i, {})[p] = v
    over_batch = {}
    for b, by_isl in by_batch.items():
        over_isl = {i: v for i, pts in by_isl.items() if (v := _lerp_points(pts, prefix)) is not None}
        if (v := _lerp_points(over_isl, isl)) is not None:
            over_batch[b] = v
    v = _lerp_points(over_batch, batch)
    return 0.0 if v is None else max(0.0, v)
