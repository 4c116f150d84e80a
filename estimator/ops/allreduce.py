"""Custom (in-node) allreduce: a bf16 message-size curve per GPU count, as the reference prices it.

Rows: allreduce.yaml drops the eager twins of the CUDA-graph rows (sglang/vLLM tables hold both at each
key) before first-wins, as 0.12.0 does in prefill and decode alike. GPU count: tp = 1 costs nothing; a
collected count reads its own curve (also above the node: gb300 tables hold 8- and 16-GPU rows); an
uncollected count inside the collected range is a miss; above the largest collected count m it is priced
at m and scaled by the NCCL fan-out factor (n-1)/n · m/(m-1) · p2p_bw(m)/p2p_bw(n).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import polars as pl

from perfledger.estimator.data.sources import first_wins
from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError
from perfledger.estimator.fit.curve import eval_curve
from perfledger.estimator.fit.roofline import custom_allreduce_sol
from perfledger.estimator.fit.util_grid import curve_estimate
from perfledger.estimator.ops.base import OpModel
from perfledger.safe_io import data_yaml

RULE_YAML = Path(__file__).with_name("allreduce.yaml")


@cache
def row_rule(path: Path = RULE_YAML) -> tuple[tuple[str, ...], frozenset[str]]:
    """(kernel_source substrings to drop, systems that keep them) from allreduce.yaml."""
    doc = data_yaml(Path(path)) or {}
    out = []
    for key in ("drop_kernel_sources_containing", "keep_on_systems"):
        val = doc.get(key)
        if not isinstance(val, list) or not all(isinstance(v, str) and v for v in val):
            raise ValueError(f"{path}: key {key!r} must be a list of non-empty strings (got {val!r})")
        out.append(val)
    return tuple(out[0]), frozenset(out[1])


def graph_rows(rows: pl.DataFrame, system: str, rule=None) -> pl.DataFrame:
    """The rows 0.12.0 prices from, first key wins: the rule's dropped kernel sources removed (unless the
    system keeps them)."""
    drop, keep = rule or row_rule()
    if system not in keep and drop and "kernel_source" in rows.columns:
        rows = rows.filter(~pl.any_horizontal(pl.col("kernel_source").str.contains(s, literal=True) for s in drop))
    return first_wins(rows, CustomAllReduceModel.tables[0])


def priced_count(tp: int, counts: list[int]) -> int:
    """The collected GPU count that prices tp: tp itself, or the largest when tp is beyond it (else tp, a miss)."""
    return min(tp, counts[-1]) if counts else tp


class CustomAllReduceModel(OpModel):
    name = "allreduce"
    tables = ("custom_allreduce_perf",)
    group_keys = ("system", "backend", "version", "tp")
    value_columns = ("elements",)

    def sol(self, est, key, q):
        return custom_allreduce_sol(q["elements"], np.full(q.height, int(key["tp"])), est.spec(key["system"]))[0]

    def _curve(self, est, key, shared: bool = True) -> tuple[int, pl.DataFrame]:
        """(GPU count m that prices tp, its message-size curve in file order); a typed miss otherwise."""
        system, tp = key["system"], int(key["tp"])
        backend, version = key["backend"], key["version"]
        rows = est.memo(
            ("allreduce_rows", system, backend, version, shared),
            lambda: graph_rows(est.table(system, backend, version, self.table, shared=shared, dedupe=False), system),
        )
        counts = sorted(rows["num_gpus"].unique().to_list())
        m = priced_count(tp, counts)
        curve = rows.filter(pl.col("num_gpus") == m)
        if not curve.height:
            raise NoDataError(f"{self.table} {system}/{backend}/{version}: no rows for num_gpus={m} (have {counts})")
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
        """Util grid over the slice's message sizes; tp beyond the data borrows the top slice (xshape)."""
        tp, spec = int(key["tp"]), est.spec(key["system"])
        if tp <= 1:
            return np.zeros(q.height), "sol"
        try:
            m, curve = self._curve(est, key, shared)
        except NoDataError as exc:
            raise EmpiricalUnavailableError(str(exc)) from exc
        def sol_at(gpus):
            return lambda x: custom_allreduce_sol(x, np.full(len(x), gpus), spec)[0]
        lat = curve_estimate(curve["message_size"].to_numpy(), curve["latency"].to_numpy(), sol_at(m), sol_at(tp), q["elements"])
        return lat, "xshape" if tp > m else "empirical"
