"""NCCL collectives: a message-size curve per (op, dtype, num_gpus), fan-out scaled beyond the data.

The curve's out-of-range proxy is SOL(size) = size, i.e. latency scales linearly from the edge in
both directions. A GPU count above the largest collected one m is priced at m and multiplied by
(n-1)/n · m/(m-1) · p2p_bw(m)/p2p_bw(n); an uncollected count inside the range is a miss.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from perfledger.estimator.data.sources import first_wins
from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError
from perfledger.estimator.fit.curve import eval_curve
from perfledger.estimator.fit.roofline import nccl_sol
from perfledger.estimator.fit.util_grid import curve_estimate
from perfledger.estimator.ops.base import OpModel
from perfledger.estimator.quant.profiles import quant_profile

OPS = ("all_gather", "reduce_scatter", "all_reduce", "alltoall")


class NcclModel(OpModel):
    name = "comm"
    tables = ("nccl_perf",)
    group_keys = ("system", "op", "quant", "num_gpus")
    value_columns = ("elements",)

    def sol(self, est, key, q):
        if key["op"] not in OPS:
            raise ValueError(f"unknown comm op {key['op']!r}; expected one of {', '.join(OPS)}")
        spec = est.spec(key["system"])
        mem = quant_profile("comm", key["quant"]).memory
        return nccl_sol(key["op"], q["elements"], np.full(q.height, int(key["num_gpus"])), mem, spec)[0]

    def _rows(self, est, system: str) -> pl.DataFrame:
        def build():
            spec = est.spec(system)
            df = est.table(system, "nccl", spec.nccl_version, self.table, shared=False, dedupe=False)
            return first_wins(df.filter(~pl.col("kernel_source").str.contains("_eager")), self.table)

        return est.memo(("nccl_rows", system), build)

    def _curve(self, est, key) -> tuple[int, pl.DataFrame]:
        """(collected GPU count m that prices the query, its message-size curve); a typed miss otherwise."""
        n = int(key["num_gpus"])
        rows = self._rows(est, key["system"]).filter(
            (pl.col("op_name") == key["op"]) & (pl.col("nccl_dtype") == key["quant"])
        )
        counts = sorted(rows["num_gpus"].unique().to_list())
        if not counts:
            raise NoDataError(f"no nccl_perf rows for {key['system']} {key['op']} {key['quant']}")
        top = counts[-1]
        if n not in counts and n < top:
            raise NoDataError(f"nccl_perf {key['system']} {key['op']} {key['quant']}: num_gpus={n} not collected (have {counts})")
        m = min(n, top)
        return m, rows.filter(pl.col("num_gpus") == m)  # file order (the util grid's tie-break)

    def silicon(self, est, key, q):
        n = int(key["num_gpus"])
        elements = q["elements"].astype(np.float64)
        if n <= 1:
            return np.zeros(q.height), np.zeros(q.height, dtype=bool)
        m, curve = self._curve(est, key)
        curve = curve.sort("message_size", maintain_order=True)
        lat, miss = eval_curve(curve["message_size"].to_numpy(), curve["latency"].to_numpy(), elements, lambda x: x)
        if n > m:
            spec = est.spec(key["system"])
            lat = lat * ((n - 1) / n * m / (m - 1) * spec.p2p_bw(m) / spec.p2p_bw(n))
        return lat, miss

    def empirical(self, est, key, q, shared=False):
        """Util grid over the slice's message sizes; a fan-out beyond the data borrows the top slice (xshape)."""
        n = int(key["num_gpus"])
        if n <= 1:
            return np.zeros(q.height), "sol"
        try:
            m, curve = self._curve(est, key)
        except NoDataError as exc:
            raise EmpiricalUnavailableError(str(exc)) from exc
        spec, mem = est.spec(key["system"]), quant_profile("comm", key["quant"]).memory
        sol_at = lambda gpus: lambda x: nccl_sol(key["op"], x, np.full(len(x), gpus), mem, spec)[0]  # noqa: E731
        lat = curve_estimate(curve["message_size"].to_numpy(), curve["latency"].to_numpy(), sol_at(m), sol_at(n), q["elements"])
        return lat, "xshape" if n > m else "empirical"
