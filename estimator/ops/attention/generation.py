"""Generation (decode) attention: a raw Grid over [num_heads][batch][kv step + 1], averaged over 5 samples.

The silicon value at sequence length s is the mean over 5 kv steps: the integer points of an even
5-point spread between int(0.9·s) and int(1.1·s), each minus one (the reference's sampling rule).
Measured rows are raised to their SOL at load (the reference clamps generation attention, not context).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from perfledger.estimator.fit.grid import evaluate_many, rows_grid
from perfledger.estimator.fit.roofline import generation_attention_sol
from perfledger.estimator.ops.attention.context import (
    KV_BYTES,
    evaluate_by_pool,
    pool_picker,
    pool_power,
    pooled_empirical,
)
from perfledger.estimator.ops.attention.kernel_lanes import pool_rows
from perfledger.estimator.ops.base import OpModel

AXES = ("num_heads", "batch_size", "seq")  # seq = kv step + 1: the log-space transfer distance uses it
LANE_COLUMNS = ("kv_cache_dtype", "head_dim", "window_size", "num_key_value_heads")
SPREAD = (0.9, 1.1)  # the sampled sequence range, as fractions of s
SAMPLES = 5


def kv_samples(seq) -> np.ndarray:
    """The 5 kv steps averaged for a sequence length (truncated spread ends, truncated points, minus one); for an
    array of lengths, one row of 5 per length."""
    seq = np.asarray(seq, dtype=np.int64)
    lo, hi = (seq * SPREAD[0]).astype(np.int64), (seq * SPREAD[1]).astype(np.int64)
    return np.linspace(lo, hi, SAMPLES, axis=-1).astype(np.int64) - 1


class GenerationAttentionModel(OpModel):
    name = "generation_attention"
    group_keys = ("system", "backend", "version", "kv_quant", "head_dim", "window", "kv_heads", "lane_defaults")
    value_columns = ("heads", "batch", "seq")
    defaults = {"lane_defaults": False}  # static engines pin the framework lane (ops/attention/kernel_lanes.py)
    tables = ("generation_attention_perf",)
    lane_columns = LANE_COLUMNS

    @staticmethod
    def quant_filters(key) -> dict:
        return {"kv_cache_dtype": key["kv_quant"]}

    @staticmethod
    def head_scale(key, own: int, ref: int) -> float:
        """0.12.0 borrows another head size's decode util unscaled (the ratio table is prefill-only)."""
        return 1.0

    def _sol_fn(self, est, key):
        spec = est.spec(key["system"])
        kv = key["kv_quant"]
        flops = spec.tc_flops("fp8" if kv == "fp8" else "bfloat16")
        hd, win, nkv = int(key["head_dim"]), int(key["window"]), int(key["kv_heads"])

        def sol(heads, batch, seq, kv_heads=nkv):
            return generation_attention_sol(batch, seq, heads, kv_heads, hd, win, KV_BYTES[kv], flops, spec.mem_bw)[0]

        return sol

    def sol(self, est, key, q):
        return self._sol_fn(est, key)(q["heads"], q["batch"], q["seq"])

    def _pool_sol(self, est, key, mha: bool):
        """SOL over (heads, batch, seq) for a pool: the MHA pool's kv heads follow heads."""
        base = self._sol_fn(est, key)
        return (lambda h, b, s: base(h, b, s, h)) if mha else base

    def _rows(self, est, key, mha: bool, shared: bool = True, lane: str | None = None) -> pl.DataFrame:
        """The pool's rows (first lane holding them, or `lane`) with seq = step + 1, latencies raised to
        their SOL (the reference's load clamp)."""
        filters = {"kv_cache_dtype": key["kv_quant"], "head_dim": int(key["head_dim"]), "window_size": int(key["window"])}
        rows = pool_rows(est, key, self.table, filters, mha, LANE_COLUMNS, shared=shared, lane=lane)
        rows = rows.with_columns((pl.col("step") + 1).alias("seq"))
        floor = self._pool_sol(est, key, mha)(rows["num_heads"].to_numpy(), rows["batch_size"].to_numpy(), rows["seq"].to_numpy())
        return rows.with_columns(pl.Series("latency", np.maximum(rows["latency"].to_numpy(), floor)))  # SOL clamp

    def _grid(self, est, key, mha: bool = False):
        """GQA pool (kv-heads slice less its heads == kv rows) or MHA pool (all heads == kv rows), as in attention.py."""
        def build():
            rows, sol = self._rows(est, key, mha), self._pool_sol(est, key, mha)
            return rows_grid(rows, AXES, lambda c: float(sol(c["num_heads"], c["batch_size"], c["seq"])))

        return est.memo(("gen_grid", mha, *(key[c] for c in self.group_keys)), build)

    def _samples(self, est, key, q, power: bool = False) -> np.ndarray:
        """Latency (or measured power, `fit/grid.power_grid`) at each query's 5 kv samples, one row of 5 per query,
        every sample of a head count evaluated in one Grid pass; NaN rows where the pool has no grid."""
        pick = pool_picker(self, est, key)
        heads, batch = np.asarray(q["heads"], dtype=np.int64), np.asarray(q["batch"], dtype=np.int64)
        samples = kv_samples(q["seq"])
        out = np.full((q.height, SAMPLES), np.nan)
        for h in np.unique(heads):
            rows, mha = heads == h, int(h) == int(key["kv_heads"])
            if power:
                grid = pool_power(self, est, key, mha, AXES)
                sol_many = lambda c: np.ones(len(c["seq"]))  # noqa: E731 -- a power grid rescales nothing
            else:
                grid, sol = pick(h), self._pool_sol(est, key, mha)
                sol_many = lambda c, sol=sol: sol(c["num_heads"], c["batch_size"], c["seq"])  # noqa: E731
            if grid is None:
                continue
            coords = {"num_heads": np.full(rows.sum() * SAMPLES, int(h)), "batch_size": np.repeat(batch[rows], SAMPLES),
                      "seq": samples[rows].ravel() + 1}
            out[rows] = evaluate_many(grid, coords, sol_many)[0].reshape(-1, SAMPLES)
        return out

    def silicon(self, est, key, q):
        """The mean over each query's 5 kv samples."""
        out = self._samples(est, key, q).mean(axis=1)
        return out, np.isnan(out)

    def energy(self, est, key, q, latency):
        """The mean over the 5 kv samples of measured power × that sample's (SOL-clamped) latency (0.12.0, probed)."""
        power = self._samples(est, key, q, power=True)
        if np.isnan(power).all():
            return None
        return (power * self._samples(est, key, q)).mean(axis=1)

    def empirical(self, est, key, q, shared: bool = False):
        """SOL / util of the pool's UtilGrid over [heads, batch, seq], borrowing as pooled_empirical says."""
        return pooled_empirical(self, est, key, q, shared, AXES)

    def evaluate(self, est, key, q, mode):
        """HYBRID / EMPIRICAL run per pool (MHA, GQA): each borrows, and is labelled, on its own."""
        if mode not in ("hybrid", "empirical"):
            return super().evaluate(est, key, q, mode)
        return evaluate_by_pool(self, est, key, q, mode,
                                lambda k, part, m: super(GenerationAttentionModel, self).evaluate(est, k, part, m))
