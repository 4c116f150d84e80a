"""KDA (Kimi Delta Attention) kernels from kda_perf, as 0.12.0 prices them inside the collected grid.

Context kernels (causal_conv1d_fn_qkv3, flashkda_fwd, chunk_kda) are a (batch, seq_len) grid, bilinear in
both (found by probing the reference: every off-grid query inside the grid is the bilinear value);
generation kernels (fused_kda_decode, causal_conv1d_update, ...) are one batch curve at seq_len 1, linear
inside. Heads are per attention-TP shard. 0.12.0 has no KDA roofline (its SOL call raises), so `sol_ms`
is NaN and SOL/EMPIRICAL raise; queries outside the grid or at uncollected heads are typed misses here
(the reference answers some of them by rules not reproduced yet; see docs/estimator.md Known gaps).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from estimator.errors import EmpiricalUnavailableError, NoDataError
from estimator.ops.base import OpModel

TABLE = "kda_perf"
PHASES = ("context", "generation")


class KdaModel(OpModel):
    name = "kda_kernel"
    group_keys = ("system", "backend", "version", "kernel", "phase", "heads", "head_dim", "d_model", "d_conv")
    value_columns = ("batch", "seq")
    defaults = {"head_dim": 128, "d_model": 7168, "d_conv": 4, "seq": 1}

    def sol(self, est, key, q):
        return np.full(q.height, np.nan)

    def empirical(self, est, key, q, shared=False):
        raise EmpiricalUnavailableError("kda: 0.12.0 has no KDA roofline, so there is no SOL/EMPIRICAL estimate")

    def evaluate(self, est, key, q, mode):
        if mode == "sol":
            raise EmpiricalUnavailableError("kda: 0.12.0 has no KDA roofline (SOL mode is not available)")
        return super().evaluate(est, key, q, mode)

    def _grid(self, est, key) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(batches, seqs, latency[batch, seq] with NaN holes) of one kernel slice; typed miss if absent."""
        if key["phase"] not in PHASES:
            raise NoDataError(f"kda: phase {key['phase']!r} is not priced (have {', '.join(PHASES)})")

        def build():
            rows = est.table(key["system"], key["backend"], key["version"], TABLE, shared=True)
            coords = {"kernel_source": key["kernel"], "phase": key["phase"], "num_k_heads": int(key["heads"]),
                      "num_v_heads": int(key["heads"]), "head_k_dim": int(key["head_dim"]),
                      "head_v_dim": int(key["head_dim"]), "d_model": int(key["d_model"]), "d_conv": int(key["d_conv"])}
            rows = rows.filter(*[pl.col(c) == v for c, v in coords.items()])
            if not rows.height:
                where = ", ".join(f"{c}={v}" for c, v in coords.items())
                raise NoDataError(f"{TABLE} {key['system']}/{key['backend']}/{key['version']}: no rows for {where}")
            batches = np.sort(rows["batch_size"].unique().to_numpy())
            seqs = np.sort(rows["seq_len"].unique().to_numpy())
            grid = np.full((len(batches), len(seqs)), np.nan)
            grid[np.searchsorted(batches, rows["batch_size"].to_numpy()),
                 np.searchsorted(seqs, rows["seq_len"].to_numpy())] = rows["latency"].to_numpy()
            return batches, seqs, grid

        return est.memo(("kda_grid", *(key[c] for c in self.group_keys)), build)

    def silicon(self, est, key, q):
        batches, seqs, grid = self._grid(est, key)
        seq = np.ones(q.height) if key["phase"] == "generation" else q["seq"].astype(np.float64)
        bi, bw, bmiss = _bracket(batches, q["batch"].astype(np.float64))
        si, sw, smiss = _bracket(seqs, seq)
        grid = np.pad(grid, ((0, int(len(batches) == 1)), (0, int(len(seqs) == 1))), mode="edge")  # one-point axes
        lat = ((1 - bw) * ((1 - sw) * grid[bi, si] + sw * grid[bi, si + 1])
               + bw * ((1 - sw) * grid[bi + 1, si] + sw * grid[bi + 1, si + 1]))
        miss = bmiss | smiss | ~np.isfinite(lat)
        return np.where(miss, np.nan, lat), miss


def _bracket(axis: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower index, weight of the upper point, outside mask); a one-point axis answers only itself."""
    if len(axis) == 1:
        return np.zeros(len(x), dtype=np.int64), np.zeros(len(x)), x != axis[0]
    i = np.clip(np.searchsorted(axis, x, side="right") - 1, 0, len(axis) - 2)
    w = (x - axis[i]) / (axis[i + 1] - axis[i])
    return i, np.clip(w, 0.0, 1.0), (x < axis[0]) | (x > axis[-1])
