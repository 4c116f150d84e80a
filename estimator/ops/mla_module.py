"""MLA *module* ops (vLLM, Kimi-K3): the whole attention block (projections + kernel) as one measured op.

Same Grids as the per-op MLA tables (context [heads][isl][batch], sqrt-latency along isl; generation
[heads][batch][kv step + 1] at step s − 1), over mla_context_module_perf / mla_generation_module_perf and
keyed also by the block's GEMM quant. Checked against 0.12.0 inside the data only: out of range these
Grids transfer util with the per-op MLA rooflines, which 0.12.0's module op may not share (docs gap).
"""

from __future__ import annotations

import polars as pl

from estimator.grid import table_slice
from estimator.ops.mla import ContextMlaModel, GenerationMlaModel


class ContextMlaModuleModel(ContextMlaModel):
    name = "mla_context_module"
    group_keys = ("system", "backend", "version", "fmha_quant", "kv_quant", "gemm_quant")

    def _rows(self, est, key, shared=True):
        return table_slice(est, key["system"], key["backend"], key["version"], "mla_context_module_perf",
                           {"mla_dtype": key["fmha_quant"], "kv_cache_dtype": key["kv_quant"],
                            "gemm_type": key["gemm_quant"]}, shared=shared)


class GenerationMlaModuleModel(GenerationMlaModel):
    name = "mla_generation_module"
    group_keys = ("system", "backend", "version", "kv_quant", "gemm_quant")

    def _rows(self, est, key, shared=True):
        rows = table_slice(est, key["system"], key["backend"], key["version"], "mla_generation_module_perf",
                           {"kv_cache_dtype": key["kv_quant"], "gemm_type": key["gemm_quant"]}, shared=shared)
        return rows.with_columns((pl.col("step") + 1).alias("seq"))
