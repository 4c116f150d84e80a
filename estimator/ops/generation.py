"""Generation (decode) attention: a raw Grid over [num_heads][batch][kv step], averaged over 5 samples.

The silicon value at sequence length s is the mean over kv lengths spread ±10% around s - 1.
Known gap: the reference's exact sampling rule is not reproduced; answers agree within ~0.1%.
"""

from __future__ import annotations

import numpy as np

from estimator.grid import evaluate, rows_grid, table_slice
from estimator.ops.attention import KV_BYTES
from estimator.ops.base import OpModel
from estimator.sol import generation_attention_sol

TABLE = "generation_attention_perf"
AXES = ("num_heads", "batch_size", "step")
SPREAD = np.linspace(-0.1, 0.1, 5)


class GenerationAttentionModel(OpModel):
    name = "generation_attention"
    group_keys = ("system", "backend", "version", "kv_quant", "head_dim", "window", "kv_heads")
    value_columns = ("heads", "batch", "seq")

    def _sol_fn(self, est, key):
        spec = est.spec(key["system"])
        kv = key["kv_quant"]
        flops = spec.tc_flops("fp8" if kv == "fp8" else "bfloat16")
        hd, win, nkv = int(key["head_dim"]), int(key["window"]), int(key["kv_heads"])
        return lambda heads, batch, seq: generation_attention_sol(batch, seq, heads, nkv, hd, win, KV_BYTES[kv], flops, spec.mem_bw)[0]

    def sol(self, est, key, q):
        return self._sol_fn(est, key)(q["heads"], q["batch"], q["seq"])

    def _grid(self, est, key):
        def build():
            filters = {"kv_cache_dtype": key["kv_quant"], "head_dim": int(key["head_dim"]), "window_size": int(key["window"]),
                       "num_key_value_heads": int(key["kv_heads"])}
            rows = table_slice(est, key["system"], key["backend"], key["version"], TABLE, filters)
            sol = self._sol_fn(est, key)
            return rows_grid(rows, AXES, lambda c: float(sol(c["num_heads"], c["batch_size"], c["step"] + 1)))

        return est.memo(("gen_grid", *(key[c] for c in self.group_keys)), build)

    def silicon(self, est, key, q):
        grid = self._grid(est, key)
        out = np.empty(q.height)
        for i, (h, b, s) in enumerate(zip(q["heads"], q["batch"], q["seq"])):
            samples = [evaluate(grid, {"num_heads": int(h), "batch_size": int(b), "step": max(kv, 1.0)})[0]
                       for kv in (s - 1) * (1 + SPREAD) - 1]
            out[i] = np.nan if any(v is None for v in samples) else float(np.mean(samples))
        return out, np.isnan(out)
