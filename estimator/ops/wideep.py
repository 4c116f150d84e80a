"""SGLang's wide-EP (DeepEP) ops: the expert compute and the MLA module its large-EP DeepSeek layer prices.

0.12.0's planner prices a DeepSeek-V3 pure-EP layout on SGLang through DeepEP (plan/large_ep.py): the routed experts
read the wide-EP MoE tables (moe/sglang/<v>/wideep_{context,generation}_moe_perf, one per phase, the fused MoE's
columns), the attention block the wide-EP MLA module tables (mla/sglang/<v>/wideep_{context,generation}_mla_perf, the
q_b / kv_b / o projections inside, one kernel source per row). Both are read as their fused twins read theirs: the
expert compute as `ops/moe.py`'s token curve, the MLA module as `ops/mla/kernels.py`'s Grids, the rows filtered by
the module's kernel source. 0.12.0 prices them from measured rows only: EMPIRICAL and SOL have no answer.
"""

from __future__ import annotations

import polars as pl

from perfledger.estimator.data.sources import first_wins
from perfledger.estimator.errors import EmpiricalUnavailableError
from perfledger.estimator.fit.grid import table_slice
from perfledger.estimator.fit.roofline import wide_ep_context_mla_sol, wide_ep_generation_mla_sol
from perfledger.estimator.ops.base import Answer
from perfledger.estimator.ops.mla.kernels import ContextMlaModel, GenerationMlaModel, dims
from perfledger.estimator.ops.moe import MoeModel
from perfledger.estimator.quant.profiles import quant_profile

PHASES = ("context", "generation")


class _MeasuredOnly:
    """HYBRID is SILICON (nothing to fall back to); EMPIRICAL and SOL are refused."""

    def evaluate(self, est, key, q, mode) -> Answer:
        if mode in ("empirical", "sol"):
            raise EmpiricalUnavailableError(f"{self.name}: 0.12.0 prices the wide-EP path from measured rows only, not {mode}")
        return super().evaluate(est, key, q, "silicon")


class WideEpMoeModel(_MeasuredOnly, MoeModel):
    """Expert compute of one phase over its wide-EP MoE table (moe_tp 1; the fused MoE's token curve)."""

    name = "wideep_moe"
    tables = tuple(f"wideep_{phase}_moe_perf" for phase in PHASES)
    group_keys = (*MoeModel.group_keys, "phase")

    @staticmethod
    def phase_table(phase: str) -> str:
        if phase not in PHASES:
            raise ValueError(f"wideep_moe phase {phase!r}: expected one of {', '.join(PHASES)}")
        return f"wideep_{phase}_moe_perf"

    def _table(self, est, key, kind, shared: bool = True) -> pl.DataFrame:
        table = self.phase_table(key["phase"])

        def build():
            return first_wins(est.table(key["system"], key["backend"], key["version"], table, shared=shared, dedupe=False),
                              table)

        rows = est.memo(("wideep_moe_table", key["system"], key["backend"], key["version"], table, shared), build)
        return rows if kind is True else rows.clear()


class _WideEpMla(_MeasuredOnly):
    """The wide-EP MLA module rows of one kernel source at the query's FMHA / KV quants, priced over the module's own
    roofline (`roofline_quant`'s GEMM profile: bytes per element and the projections' rate as a multiple of bf16's,
    attention at bf16's; mla.yaml `wide_ep` geometry)."""

    filters: tuple[tuple[str, str], ...] = ()
    roofline_quant = ""
    roofline = staticmethod(wide_ep_context_mla_sol)

    def _sol(self, est, key):
        spec, prof = est.spec(key["system"]), quant_profile("gemm", key[self.roofline_quant])
        bf16 = spec.tc_flops("bfloat16")
        geometry = dims()["wide_ep"]
        return self._ordered(lambda h, b, s: self.roofline(b, s, h, geometry, prof.memory, bf16 * prof.compute, bf16,
                                                           spec.mem_bw)[0])

    def _rows(self, est, key, shared=True):
        rows = table_slice(est, key["system"], key["backend"], key["version"], self.table,
                           {"kernel_source": key["kernel"], **{col: key[k] for col, k in self.filters}}, shared=shared)
        return self._shape(rows)

    def _shape(self, rows: pl.DataFrame) -> pl.DataFrame:
        return rows


class WideEpContextMlaModel(_WideEpMla, ContextMlaModel):
    """Grid [heads][isl][batch], sqrt-latency along isl (the context MLA's)."""

    name = "wideep_context_mla"
    tables = ("wideep_context_mla_perf",)
    group_keys = (*ContextMlaModel.group_keys, "kernel")
    filters = (("mla_dtype", "fmha_quant"), ("kv_cache_dtype", "kv_quant"))
    roofline_quant = "fmha_quant"

    @staticmethod
    def _ordered(sol):
        return lambda h, s, b: sol(h, b, s)


class WideEpGenerationMlaModel(_WideEpMla, GenerationMlaModel):
    """Grid [heads][batch][kv length], raw; the rows' `isl` is the kv length (step is 0); the FMHA label is not a
    key, the roofline follows the KV quant."""

    name = "wideep_generation_mla"
    tables = ("wideep_generation_mla_perf",)
    group_keys = (*GenerationMlaModel.group_keys, "kernel")
    filters = (("kv_cache_dtype", "kv_quant"),)
    roofline_quant = "kv_quant"
    roofline = staticmethod(wide_ep_generation_mla_sol)

    @staticmethod
    def _ordered(sol):
        return sol

    def _shape(self, rows: pl.DataFrame) -> pl.DataFrame:
        return rows.with_columns(pl.col("isl").alias("seq"))
