"""fp8_static GEMM overheads: the quantize tables (compute_scale, scale_matrix) over an (m, k) grid.

fp8_static is priced as the fp8 GEMM minus the activation-scale computation (and minus the scaling
pass for low-precision-input GEMMs), floored at the GEMM SOL. SILICON: each overhead is a bilinear blend
inside its (m, k) grid; beyond it compute_scale (a delta) is held flat at the clamped point and
scale_matrix is scaled by its roofline ratio m·k / (m_edge·k_edge). Energy follows the same subtraction: the fp8
GEMM's energy minus each overhead's (grid power × overhead latency), floored at 0. EMPIRICAL: compute_scale is the
nearest sample (normalised log space) scaled by m·k ratio, scale_matrix a util grid (SOL = 3·m·k / B).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from perfledger.estimator.errors import NoDataError
from perfledger.estimator.fit.util_grid import build_util_grid, query_util

OVERHEADS = {"compute_scale": ("computescale_perf", False), "scale_matrix": ("scale_matrix_perf", True)}


def _grid(est, system: str, backend: str, version: str, table: str, quant: str, column: str = "latency"):
    """(m axis, k axis, `column` matrix) of one quantize table; a hole in the rectangle is NaN, a null power 0."""

    def build():
        df = est.table(system, backend, version, table, shared=True).filter(pl.col("quant_dtype") == quant)
        if not df.height:
            raise NoDataError(f"no {table} rows for {system}/{backend}/{version} quant_dtype={quant}")
        ms, ks = np.sort(df["m"].unique().to_numpy()), np.sort(df["k"].unique().to_numpy())
        mat = np.full((len(ms), len(ks)), np.nan)
        if column == "power":  # absent or null power reads 0 W, as 0.12.0 reads it; latency is a required column
            values = df[column].cast(pl.Float64).fill_null(0.0) if column in df.columns else pl.Series(np.zeros(df.height))
        else:
            values = df[column]
        mat[np.searchsorted(ms, df["m"].to_numpy()), np.searchsorted(ks, df["k"].to_numpy())] = values.to_numpy()
        return ms.astype(np.float64), ks.astype(np.float64), mat

    return est.memo(("quantize_grid", system, backend, version, table, quant, column), build)


def _bracket(axis: np.ndarray, x: np.ndarray):
    """Clamped coordinate, lower index and blend weight along one axis."""
    xc = np.clip(x, axis[0], axis[-1])
    hi = np.clip(np.searchsorted(axis, xc, side="left"), 1, max(len(axis) - 1, 1))
    lo = hi - 1 if len(axis) > 1 else np.zeros_like(hi)
    hi = hi if len(axis) > 1 else lo
    span = axis[hi] - axis[lo]
    t = np.where(span > 0, (xc - axis[lo]) / np.where(span > 0, span, 1.0), 0.0)
    return xc, lo, hi, t


def _bilinear(est, where: tuple, table: str, column: str, m, k, quant: str):
    """`column` blended bilinearly inside the (m, k) grid at the clamped point; also the clamped (m, k)."""
    ms, ks, mat = _grid(est, *where, table, quant, column)
    mc, mlo, mhi, tm = _bracket(ms, m)
    kc, klo, khi, tk = _bracket(ks, k)
    low = mat[mlo, klo] + (mat[mlo, khi] - mat[mlo, klo]) * tk
    high = mat[mhi, klo] + (mat[mhi, khi] - mat[mhi, klo]) * tk
    out = low + (high - low) * tm
    if np.isnan(out).any():
        i = int(np.flatnonzero(np.isnan(out))[0])
        raise NoDataError(f"{table} {'/'.join(where)}: no grid corners around m={m[i]:g}, k={k[i]:g}")
    return out, mc, kc


def overhead(est, system: str, backend: str, version: str, name: str, m, k, quant: str = "fp8") -> np.ndarray:
    """Latency (ms) of one quantize overhead at each (m, k)."""
    table, scaled = OVERHEADS[name]
    m, k = np.asarray(m, dtype=np.float64), np.asarray(k, dtype=np.float64)
    out, mc, kc = _bilinear(est, (system, backend, version), table, "latency", m, k, quant)
    return out * (m * k) / (mc * kc) if scaled else out


def overhead_energy(est, system: str, backend: str, version: str, name: str, m, k, quant: str = "fp8") -> np.ndarray:
    """Energy (W·ms) of one quantize overhead: its grid power (bilinear, clamped, never scaled) × `overhead`."""
    table, _ = OVERHEADS[name]
    m, k = np.asarray(m, dtype=np.float64), np.asarray(k, dtype=np.float64)
    power = _bilinear(est, (system, backend, version), table, "power", m, k, quant)[0]
    return power * overhead(est, system, backend, version, name, m, k, quant)


def overhead_empirical(est, system: str, backend: str, version: str, name: str, m, k, quant: str = "fp8") -> np.ndarray:
    """EMPIRICAL latency (ms) of one quantize overhead (own version only).

    compute_scale: the nearest sample in min-max normalised log (m, k), zero latencies included (a zero
    delta stays zero), scaled by m·k / (m_s·k_s). scale_matrix: a util grid with util ∝ m·k / latency
    (the roofline 3·m·k / B up to a constant that cancels).
    """
    table, _ = OVERHEADS[name]

    def build():
        df = est.table(system, backend, version, table, shared=False).filter(pl.col("quant_dtype") == quant)
        if not df.height:
            raise NoDataError(f"no {table} rows for {system}/{backend}/{version} quant_dtype={quant}")
        coords = np.column_stack([df["m"].to_numpy(), df["k"].to_numpy()]).astype(np.float64)
        lat = df["latency"].to_numpy()
        with np.errstate(divide="ignore"):
            grid = build_util_grid(coords, coords[:, 0] * coords[:, 1] / lat)
        logc = np.log(coords)
        lo, span = logc.min(axis=0), logc.max(axis=0) - logc.min(axis=0)
        span[span == 0] = 1.0
        return grid, (logc - lo) / span, lo, span, coords, lat

    grid, points, lo, span, coords, lat = est.memo(("quantize_empirical", system, backend, version, table, quant), build)
    m, k = np.asarray(m, dtype=np.float64), np.asarray(k, dtype=np.float64)
    if name == "scale_matrix":
        if grid is None:
            raise NoDataError(f"{table} {system}/{backend}/{version}: no positive latency to build a util grid")
        return m * k / query_util(grid, np.column_stack([m, k]))
    q = np.clip((np.log(np.maximum(np.column_stack([m, k]), 1e-9)) - lo) / span, 0.0, 1.0)
    nearest = np.array([int(np.argmin(((points - row) ** 2).sum(axis=1))) for row in q], dtype=np.int64)
    return lat[nearest] * (m * k) / (coords[nearest, 0] * coords[nearest, 1])
