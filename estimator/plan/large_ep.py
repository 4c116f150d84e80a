"""Which layouts 0.12.0's planner prices through the MoE all-to-all (its large-EP graph) instead of the fused MoE.

Why: its planner (never `estimate static`) switches a moe_tp 1 / moe_ep > 1 layout of a family models.yaml marks
(`moe_a2a_backends`: the frameworks whose large-EP block our plan prices) to dispatch / expert compute / combine
when the data covers it: for every phase the role runs plus context (a worker's weights are sized from its context
pass) the first comm backend in 0.12.0's registry order (ops/moe_a2a.yaml `planner_backends`) whose dispatch and
combine rows hold the model shape at the layout's (ep, nodes), or the one-node fallback, and expert-compute rows
(the framework's expert op's table for the phase: moe_perf on vLLM, SGLang's wide-EP MoE tables; moe_tp 1 at that ep,
any distribution) exist for the MoE quant. The answer rides on the `Deploy`, with the path's FMHA / KV quants.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import polars as pl

from perfledger.estimator.errors import EstimatorError
from perfledger.estimator.models.priced import PricedModel
from perfledger.estimator.ops.moe_a2a import a2a_rows, rules
from perfledger.estimator.ops.registry import get_model
from perfledger.estimator.plan.fit import MemoryModel
from perfledger.estimator.static import Deploy

PHASES = ("context", "generation")


def _pairs(rows: pl.DataFrame, comm: str, spec: dict, m: PricedModel) -> set[tuple[int, int]]:
    """(ep, nodes) where both dispatch and combine rows hold the shape under the backend's wire dtype."""
    dims = m.dims
    rows = rows.filter((pl.col("comm_backend") == comm) & (pl.col("comm_dtype") == spec["comm_dtype"])
                       & (pl.col("hidden_size") == dims.hidden) & (pl.col("topk") == dims.topk)
                       & (pl.col("num_experts") == dims.experts))
    per = [set(rows.filter(pl.col("phase") == p).select("ep_size", "node_num").unique().iter_rows())
           for p in ("dispatch", "combine")]
    return per[0] & per[1]


def _covers(pairs: set, comm: str, ep: int, nodes: int, backend: str, gpus_per_node: int) -> bool:
    if (ep, nodes) in pairs:
        return True
    fallback = rules()["node1_fallback"]
    width = fallback["ep_by_framework"].get(backend, gpus_per_node)
    return nodes > 1 and comm in fallback["comm_backends"] and (width, 1) in pairs


def switched(est, m: PricedModel, d: Deploy, role_phases: tuple[str, ...], named: Mapping | None = None) -> Deploy:
    """`d` with the all-to-all 0.12.0's planner resolves for the layout, unchanged where it stays fused; a switched
    layout takes the path's FMHA / KV quants (models.yaml `moe_a2a_quants`) unless the question `named` them."""
    resolved = comm_backends(est, m, d, role_phases)
    if not resolved:
        return d
    forced = {role: quant for role, quant in m.family.get("moe_a2a_quants", {}).get(d.backend, {}).items()
              if not (named or {}).get(role)}
    return replace(d, moe_a2a=resolved, a2a_nodes=-(-d.moe_ep // est.spec(d.system).num_gpus_per_node),
                   **{f"{role}_quant": quant for role, quant in forced.items()})


def sized_memory(memory: MemoryModel, m: PricedModel, d: Deploy) -> MemoryModel:
    """The memory model of a layout as `switched` left it: its FMHA / KV quants and, switched, the large-EP layer form
    it runs (models.yaml `moe_a2a_backends` `attention`, sized by memory.yaml `large_ep_weights`)."""
    layer = m.family["moe_a2a_backends"][d.backend].get("attention") if d.moe_a2a else None
    return memory.under({"kv": d.kv_quant, "fmha": d.fmha_quant}, layer)


def comm_backends(est, m: PricedModel, d: Deploy, role_phases: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """((phase, comm backend), ...) 0.12.0's planner resolves for the layout, () where it stays fused."""
    dims, doc = m.dims, rules()
    frameworks = m.family.get("moe_a2a_backends", {})
    if (d.backend not in frameworks or d.moe_tp != 1 or d.moe_ep <= 1
            or dims.topk > doc["planner_max_topk"] or dims.experts % d.moe_ep):
        return ()
    experts = get_model(frameworks[d.backend]["experts"])

    def computed(phase: str) -> bool:
        """Expert-compute rows of the phase at moe_tp 1 and the layout's ep for the MoE quant (any distribution)."""
        try:
            moe = est.table(d.system, d.backend, d.version, experts.phase_table(phase), shared=True)
        except EstimatorError:
            return False
        return moe.filter((pl.col("moe_dtype") == d.moe_quant) & (pl.col("hidden_size") == dims.hidden)
                          & (pl.col("inter_size") == dims.moe_inter) & (pl.col("topk") == dims.topk)
                          & (pl.col("num_experts") == dims.experts) & (pl.col("moe_tp_size") == 1)
                          & (pl.col("moe_ep_size") == d.moe_ep)).height > 0

    def build():
        try:
            a2a = a2a_rows(est, d.system, d.backend, d.version)
        except EstimatorError:
            return ()
        gpus = est.spec(d.system).num_gpus_per_node
        nodes = -(-d.moe_ep // gpus)
        resolved = {}
        for phase in PHASES:
            if not computed(phase):
                continue
            for comm, spec in doc["planner_backends"].items():
                if (d.backend in spec["frameworks"] and phase in spec["phases"]
                        and _covers(_pairs(a2a, comm, spec, m), comm, d.moe_ep, nodes, d.backend, gpus)):
                    resolved[phase] = comm
                    break
        return tuple(resolved.items())

    resolved = est.memo(("large_ep", d.system, d.backend, d.version, m.name, d.moe_quant, d.moe_ep), build)
    return resolved if {*role_phases, "context"} <= dict(resolved).keys() else ()
