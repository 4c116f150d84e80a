"""DeepSeek-V4 mHC (manifold-constrained hyper-connection) pre / post module op over mhc_module_perf.

A slice is the phase (pre | post; the table's op_name) × hc_mult × hidden size; the token axis is a 1-D curve
(exact, lerp inside, the mHC roofline's ratio outside; fit/curve.py). Both decoder sites of one layer are in
one row. Its quant is bfloat16 (0.12.0 prices mHC in bf16 whatever the deployment). EMPIRICAL: SOL / util over
the slice's own token samples.
"""

from __future__ import annotations

import numpy as np

from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError
from perfledger.estimator.fit.curve import eval_curve
from perfledger.estimator.fit.grid import table_slice
from perfledger.estimator.fit.util_grid import curve_estimate
from perfledger.estimator.ops.base import OpModel
from perfledger.estimator.ops.dsv4.roofline import mhc_sol

QUANT = "bfloat16"


class MhcModuleModel(OpModel):
    name = "mhc_module"
    tables = ("mhc_module_perf",)
    group_keys = ("system", "backend", "version", "phase", "hc_mult", "hidden", "sinkhorn_iters")
    value_columns = ("tokens",)

    def _sol(self, est, key):
        spec = est.spec(key["system"])
        return lambda t: mhc_sol(t, phase=key["phase"], hidden=int(key["hidden"]), hc_mult=int(key["hc_mult"]),
                                 sinkhorn_iters=int(key["sinkhorn_iters"]), flops=spec.tc_flops(QUANT), elem_bytes=2.0,
                                 bw=spec.mem_bw)[0]

    def sol(self, est, key, q):
        return self._sol(est, key)(q["tokens"])

    def _curve(self, est, key, shared: bool = True):
        def build():
            rows = table_slice(est, key["system"], key["backend"], key["version"], self.table,
                               {"op_name": key["phase"], "hc_mult": int(key["hc_mult"]),
                                "hidden_size": int(key["hidden"])}, shared=shared)
            rows = rows.unique("num_tokens", keep="first", maintain_order=True).sort("num_tokens")
            return rows["num_tokens"].to_numpy(), rows["latency"].to_numpy()

        return est.memo((self.name, shared, *(key[c] for c in self.group_keys)), build)

    def silicon(self, est, key, q):
        xs, lats = self._curve(est, key)
        return eval_curve(xs, lats, q["tokens"], self._sol(est, key))

    def empirical(self, est, key, q, shared: bool = False):
        try:
            xs, lats = self._curve(est, key, shared)
        except NoDataError as exc:
            raise EmpiricalUnavailableError(f"{self.name}: {exc}") from exc
        sol = self._sol(est, key)
        return curve_estimate(xs, lats, sol, sol, np.asarray(q["tokens"])), "empirical"



