"""Context attention: a Grid over [num_heads][isl][batch] per (fmha quant, kv quant, head_dim, window, kv heads).

Interpolation follows the Grid rules (sqrt-latency along isl, ragged SOL rescale, nearest-leaf util
transfer outside the data). Known gap: aiconfigurator-core 0.12.0 adds a small per-shape term
(~0.0132 ms on h200, independent of batch and isl) from its attention lanes that we do not model.
"""

from __future__ import annotations

import numpy as np

from estimator.grid import evaluate, rows_grid, table_slice
from estimator.ops.base import OpModel
from estimator.sol import context_attention_sol

TABLE = "context_attention_perf"
KV_BYTES = {"bfloat16": 2.0, "float16": 2.0, "fp8": 1.0, "int8": 1.0}
FMHA_DTYPE = {"bfloat16": "bfloat16", "float16": "bfloat16", "fp8": "fp8", "fp8_block": "fp8"}
AXES = ("num_heads", "isl", "batch_size")


class ContextAttentionModel(OpModel):
    name = "attention"
    group_keys = ("system", "backend", "version", "fmha_quant", "kv_quant", "head_dim", "window", "kv_heads")
    value_columns = ("heads", "isl", "batch")

    def _sol_fn(self, est, key):
        spec = est.spec(key["system"])
        if key["kv_quant"] not in KV_BYTES or key["fmha_quant"] not in FMHA_DTYPE:
            from estimator.errors import UnknownQuantError

            raise UnknownQuantError(f"attention quant fmha={key['fmha_quant']!r} kv={key['kv_quant']!r} not priced")
        flops = spec.tc_flops(FMHA_DTYPE[key["fmha_quant"]])
        kv_mem, hd, win, nkv = KV_BYTES[key["kv_quant"]], int(key["head_dim"]), int(key["window"]), int(key["kv_heads"])

        def sol(heads, isl, batch):
            return context_attention_sol(batch, isl, 0, heads, nkv, hd, win, kv_mem, flops, spec.mem_bw)[0]

        return sol

    def sol(self, est, key, q):
        return self._sol_fn(est, key)(q["heads"], q["isl"], q["batch"])

    def _grid(self, est, key):
        def build():
            filters = {"attn_dtype": key["fmha_quant"], "kv_cache_dtype": key["kv_quant"], "head_dim": int(key["head_dim"]),
                       "window_size": int(key["window"]), "num_key_value_heads": int(key["kv_heads"])}
            rows = table_slice(est, key["system"], key["backend"], key["version"], TABLE, filters)
            sol = self._sol_fn(est, key)
            return rows_grid(rows, AXES, lambda c: float(sol(c["num_heads"], c["isl"], c["batch_size"])), sqrt_axes=("isl",))

        return est.memo(("attn_grid", *(key[c] for c in self.group_keys)), build)

    def silicon(self, est, key, q):
        grid = self._grid(est, key)
        out = np.empty(q.height)
        for i, (h, s, b) in enumerate(zip(q["heads"], q["isl"], q["batch"])):
            value, _ = evaluate(grid, {"num_heads": int(h), "isl": int(s), "batch_size": int(b)})
            out[i] = np.nan if value is None else value
        return out, np.isnan(out)
