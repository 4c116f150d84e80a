"""Custom (in-node) allreduce: a bf16 message-size curve per GPU count, as the reference prices it.

tp = 1 costs nothing; tp above the node (also on NVL racks with 4-GPU nodes, as 0.12.0 does) is
priced at the node size and scaled by the NCCL fan-out factor (n-1)/n · m/(m-1) · p2p_bw(m)/p2p_bw(n).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from estimator.curve1d import eval_curve
from estimator.errors import EmpiricalUnavailableError, NoDataError
from estimator.ops.base import OpModel
from estimator.sol import custom_allreduce_sol
from estimator.utilgrid import curve_estimate

TABLE = "custom_allreduce_perf"


class CustomAllReduceModel(OpModel):
    name = "allreduce"
    group_keys = ("system", "backend", "version", "tp")
    value_columns = ("elements",)

    def sol(self, est, key, q):
        return custom_allreduce_sol(q["elements"], np.full(q.height, int(key["tp"])), est.spec(key["system"]))[0]

    def _curve(self, est, key, shared: bool = True) -> tuple[int, pl.DataFrame]:
        """(GPU count m that prices tp, its message-size curve in file order); a typed miss otherwise."""
        tp, spec = int(key["tp"]), est.spec(key["system"])
        rows = est.table(key["system"], key["backend"], key["version"], TABLE, shared=shared)
        counts = sorted(rows["num_gpus"].unique().to_list())
        m = min(tp, spec.num_gpus_per_node, counts[-1] if counts else tp)
        curve = rows.filter(pl.col("num_gpus") == m)
        if not curve.height:
            raise NoDataError(f"{TABLE} {key['system']}/{key['backend']}/{key['version']}: no rows for num_gpus={m} (have {counts})")
        return m, curve

    def silicon(self, est, key, q):
        tp = int(key["tp"])
        spec = est.spec(key["system"])
        if tp <= 1:
            return np.zeros(q.height), np.zeros(q.height, dtype=bool)
        m, curve = self._curve(est, key)
        curve = curve.sort("message_size", maintain_order=True)
        lat, miss = eval_curve(curve["message_size"].to_numpy(), curve["latency"].to_numpy(), q["elements"], lambda x: x)
        if tp > m:
            lat = lat * ((tp - 1) / tp * m / (m - 1) * spec.p2p_bw(m) / spec.p2p_bw(tp))
        return lat, miss

    def empirical(self, est, key, q, shared=False):
        """Util grid over the slice's message sizes; tp beyond the node/data borrows the top slice (xshape)."""
        tp, spec = int(key["tp"]), est.spec(key["system"])
        if tp <= 1:
            return np.zeros(q.height), "sol"
        try:
            m, curve = self._curve(est, key, shared)
        except NoDataError as exc:
            raise EmpiricalUnavailableError(str(exc)) from exc
        sol_at = lambda gpus: lambda x: custom_allreduce_sol(x, np.full(len(x), gpus), spec)[0]  # noqa: E731
        lat = curve_estimate(curve["message_size"].to_numpy(), curve["latency"].to_numpy(), sol_at(m), sol_at(tp), q["elements"])
        return lat, "xshape" if tp > m else "empirical"
