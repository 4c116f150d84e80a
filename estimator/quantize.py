"""fp8_static GEMM overheads: the quantize tables (compute_scale, scale_matrix) over an (m, k) grid.

fp8_static is priced as the fp8 GEMM minus the activation-scale computation (and minus the scaling
pass for low-precision-input GEMMs), floored at the GEMM SOL. Each overhead is a bilinear blend inside
its (m, k) grid; beyond it compute_scale (a delta) is held flat at the clamped point and scale_matrix
is scaled by its roofline ratio m·k / (m_edge·k_edge).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from estimator.errors import NoDataError

OVERHEADS = {"compute_scale": ("computescale_perf", False), "scale_matrix": ("scale_matrix_perf", True)}


def _grid(est, system: str, backend: str, version: str, table: str, quant: str):
    """(m axis, k axis, latency matrix) of one quantize table; a hole in the rectangle is NaN."""

    def build():
        df = est.table(system, backend, version, table, shared=True).filter(pl.col("quant_dtype") == quant)
        if not df.height:
            raise NoDataError(f"no {table} rows for {system}/{backend}/{version} quant_dtype={quant}")
        ms, ks = np.sort(df["m"].unique().to_numpy()), np.sort(df["k"].unique().to_numpy())
        mat = np.full((len(ms), len(ks)), np.nan)
        mat[np.searchsorted(ms, df["m"].to_numpy()), np.searchsorted(ks, df["k"].to_numpy())] = df["latency"].to_numpy()
        return ms.astype(np.float64), ks.astype(np.float64), mat

    return est.memo(("quantize_grid", system, backend, version, table, quant), build)


def _bracket(axis: np.ndarray, x: np.ndarray):
    """Clamped coordinate, lower index and blend weight along one axis."""
    xc = np.clip(x, axis[0], axis[-1])
    hi = np.clip(np.searchsorted(axis, xc, side="left"), 1, max(len(axis) - 1, 1))
    lo = hi - 1 if len(axis) > 1 else np.zeros_like(hi)
    hi = hi if len(axis) > 1 else lo
    span = axis[hi] - axis[lo]
    t = np.where(span > 0, (xc - axis[lo]) / np.where(span > 0, span, 1.0), 0.0)
    return xc, lo, hi, t


def overhead(est, system: str, backend: str, version: str, name: str, m, k, quant: str = "fp8") -> np.ndarray:
    """Latency (ms) of one quantize overhead at each (m, k)."""
    table, scaled = OVERHEADS[name]
    ms, ks, mat = _grid(est, system, backend, version, table, quant)
    m, k = np.asarray(m, dtype=np.float64), np.asarray(k, dtype=np.float64)
    mc, mlo, mhi, tm = _bracket(ms, m)
    kc, klo, khi, tk = _bracket(ks, k)
    low = mat[mlo, klo] + (mat[mlo, khi] - mat[mlo, klo]) * tk
    high = mat[mhi, klo] + (mat[mhi, khi] - mat[mhi, klo]) * tk
    out = low + (high - low) * tm
    if np.isnan(out).any():
        i = int(np.flatnonzero(np.isnan(out))[0])
        raise NoDataError(f"{table} {system}/{backend}/{version}: no grid corners around m={m[i]:g}, k={k[i]:g}")
    return out * (m * k) / (mc * kc) if scaled else out
