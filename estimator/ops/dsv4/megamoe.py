"""DeepSeek-V4 MegaMoE routed module (SGLang `moe_backend=megamoe`) over dsv4_megamoe_module_perf.

One measured op from pre-dispatch through the fused FP8×FP4 MegaMoE kernel to the routed output scaling (gate /
top-k and the shared expert are priced apart). A slice is phase × MoE quant × distribution (`uniform` reads as
`balanced`) × the exact expert shape (hidden, inter, topk, experts, moe_tp, moe_ep), own version only, at the
kernel dsv4.yaml `megamoe.slice` names; the token axis (per-rank tokens) is a 1-D curve: exact, lerp inside,
proportional to tokens outside (fit/curve.py with a linear scale). 0.12.0 prices it from measured rows only:
HYBRID is SILICON (no fallback), EMPIRICAL and SOL have no answer, so there is no roofline (sol NaN).
"""

from __future__ import annotations

import numpy as np

from perfledger.estimator.errors import EmpiricalUnavailableError
from perfledger.estimator.fit.curve import eval_curve
from perfledger.estimator.fit.grid import table_slice
from perfledger.estimator.ops.base import OpModel
from perfledger.estimator.ops.dsv4.module import config

SHAPE = {"quant": "moe_dtype", "hidden": "hidden_size", "inter": "inter_size", "topk": "topk", "experts": "num_experts",
         "tp": "moe_tp_size", "ep": "moe_ep_size"}


class MegaMoeModel(OpModel):
    name = "dsv4_megamoe"
    tables = ("dsv4_megamoe_module_perf",)
    group_keys = ("system", "backend", "version", "phase", "distribution", *SHAPE)
    value_columns = ("tokens",)

    def sol(self, est, key, q):
        return np.full(q.height, np.nan)

    def _curve(self, est, key):
        def build():
            rule = config()["megamoe"]
            dist = rule["distribution_aliases"].get(key["distribution"], key["distribution"])
            filters = {"phase": key["phase"], "distribution": dist, **rule["slice"],
                       **{col: key[k] if k == "quant" else int(key[k]) for k, col in SHAPE.items()}}
            rows = table_slice(est, key["system"], key["backend"], key["version"], self.table, filters, shared=False)
            rows = rows.unique("num_tokens", keep="first", maintain_order=True).sort("num_tokens")
            return rows["num_tokens"].to_numpy(), rows["latency"].to_numpy()

        return est.memo((self.name, *(key[c] for c in self.group_keys)), build)

    def silicon(self, est, key, q):
        xs, lats = self._curve(est, key)
        return eval_curve(xs, lats, q["tokens"], lambda t: np.asarray(t, dtype=np.float64))

    def evaluate(self, est, key, q, mode):
        if mode in ("empirical", "sol"):
            raise EmpiricalUnavailableError(f"{self.name}: 0.12.0 prices MegaMoE from measured rows only, not {mode}")
        if mode == "hybrid":  # nothing to fall back to: a SILICON miss stays a miss
            mode = "silicon"
        return super().evaluate(est, key, q, mode)
