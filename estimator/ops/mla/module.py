"""MLA *module* ops (vLLM, Kimi-K3): the whole attention block (projections + kernel) as one measured op.

Same Grids as the per-op MLA tables (context [heads][isl][batch], sqrt-latency along isl; generation
[heads][batch][kv step + 1] at step s − 1), over mla_context_module_perf / mla_generation_module_perf and
keyed also by the block's GEMM quant. Three 0.12.0 module rules, each found by probing it:
- Rooflines (the Grid's util transfer and `sol_ms`): context is the context-MLA kernel's alone; generation
  is ONE roofline over the whole decode block (absorbed MLA kernel + pre and post BMMs at the block's GEMM
  quant): max(Σ math, Σ memory), not the sum of three rooflines. Decode below the first collected step
  (s = 2) and in the large batch × kv-length holes was 6 % / 2e-4 off with the kernel roofline alone.
- Rows: SILICON/HYBRID also take the reuse manifest's cross-backend lenders (vLLM reads trtllm's `default`
  module rows, own rows first; sources.resolve's cross-backend channel): h100 and rtx_pro_6000 vLLM answer from them.
- Native heads: a table measured for several models (gb300 vllm 0.27.0: DeepSeek-V3 and Kimi-K3) splits
  by each row model's config head count; the query's `native_heads` picks that partition, else the largest
  one below it, else the smallest. Without `native_heads` such a table is a miss, as in 0.12.0. A table of
  one head count ignores it.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import polars as pl

from perfledger.estimator.data.sources import first_wins
from perfledger.estimator.errors import EstimatorError, NoDataError
from perfledger.estimator.fit.roofline import generation_mla_sol, mla_bmm_sol
from perfledger.estimator.models.config import model_config
from perfledger.estimator.ops.mla.kernels import ContextMlaModel, GenerationMlaModel, _bytes, _flops, dims
from perfledger.estimator.quant.profiles import quant_profile

BMMS_PER_BLOCK = 2  # decode block = pre BMM (q·W_UK) + absorbed MLA kernel + post BMM (·W_UV)


@cache
def model_heads(model: str) -> int:
    """Attention heads of a model named in a module row (its HF config, `text_config` for multimodal ones)."""
    config = model_config(model)
    heads = config.config.get("num_attention_heads") or config.text.get("num_attention_heads")
    if not heads:
        raise EstimatorError(f"{config.path}: no num_attention_heads (needed for MLA module rows of {model})")
    return int(heads)


def native_partition(rows: pl.DataFrame, native: int, where: str) -> pl.DataFrame:
    """The rows of one native head count (exact, else the largest below, else the smallest); first key wins."""
    models = rows["model"].unique().to_list() if "model" in rows.columns else []
    if len(models) > 1:
        heads = rows["model"].replace_strict({m: model_heads(m) for m in models}, return_dtype=pl.Int64)
        counts = sorted(set(heads.to_list()))
        if len(counts) > 1:
            if not native:
                raise NoDataError(f"{where}: rows of {len(counts)} native head counts {counts} "
                                  f"({', '.join(sorted(models))}); pass native_heads")
            below = [c for c in counts if c <= native]
            rows = rows.filter(heads == (below[-1] if below else counts[0]))
    return rows


def module_slice(est, key, table: str, filters: dict, shared: bool) -> pl.DataFrame:
    """Rows of a module table matching `filters` (own rows, + cross-backend lenders when shared) for the
    query's native head count; an empty slice is a NoDataError naming table, system/backend/version, filters."""
    where = (key["system"], key["backend"], key["version"])

    try:  # shared: own rows first, then the manifest's cross-backend lenders (sources.resolve)
        df = est.table(*where, table, shared=shared, dedupe=False)
    except NoDataError:
        df = pl.DataFrame()
    label = f"{table} rows for {'/'.join(where)} with " + ", ".join(f"{c}={v}" for c, v in filters.items())
    if df.height:
        df = df.filter(*(pl.col(c) == v for c, v in filters.items()))
    if not df.height:
        raise NoDataError(f"no {label}")
    return first_wins(native_partition(df, int(key["native_heads"]), label), table)


class ContextMlaModuleModel(ContextMlaModel):
    name = "mla_context_module"
    tables = ("mla_context_module_perf",)
    group_keys = ("system", "backend", "version", "fmha_quant", "kv_quant", "gemm_quant", "native_heads")
    defaults = {"native_heads": 0}

    def _rows(self, est, key, shared=True):
        return module_slice(est, key, self.table, {"mla_dtype": key["fmha_quant"],
                            "kv_cache_dtype": key["kv_quant"], "gemm_type": key["gemm_quant"]}, shared)


class GenerationMlaModuleModel(GenerationMlaModel):
    name = "mla_generation_module"
    tables = ("mla_generation_module_perf",)
    group_keys = ("system", "backend", "version", "kv_quant", "gemm_quant", "native_heads")
    defaults = {"native_heads": 0}

    def _sol(self, est, key):
        """(heads, batch, seq) -> the decode block's single roofline: max(Σ math, Σ memory) over kernel + BMMs."""
        spec, kv = est.spec(key["system"]), _bytes("kv_bytes", key["kv_quant"])
        kernel_flops = _flops(est, key["system"], key["kv_quant"])
        gemm = quant_profile("gemm", key["gemm_quant"])
        bmm_flops = spec.tc_flops(gemm.dtype)

        def sol(h, b, s):
            _, k_math, k_mem = generation_mla_sol(b, s, h, kv, dims(), kernel_flops, spec.mem_bw)
            _, b_math, b_mem = mla_bmm_sol(b, h, gemm.memory, dims(), bmm_flops, spec.mem_bw)
            return np.maximum(k_math + BMMS_PER_BLOCK * b_math, k_mem + BMMS_PER_BLOCK * b_mem)

        return sol

    def _rows(self, est, key, shared=True):
        rows = module_slice(est, key, self.table,
                            {"kv_cache_dtype": key["kv_quant"], "gemm_type": key["gemm_quant"]}, shared)
        return rows.with_columns((pl.col("step") + 1).alias("seq"))
