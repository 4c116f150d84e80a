"""MiniMax sparse attention (MSA) *module* ops (MiniMax-M3): the whole GQA sparse-attention block as one measured op.

MSA is DSA's GQA sibling: a per-block indexer scores the KV blocks, the top-k tokens are attended at full GQA
width. Its tables (msa_context_module_perf / msa_generation_module_perf) share the DSA module's row schema and
Grid (ops/dsa/module.py), anchored on the MSA roofline below. Where a slice holds no MSA rows (HYBRID's
fallback, and EMPIRICAL always), the latency is the MSA SOL over the DSA module's measured utilisation at the same
heads / batch / tokens / quants on the transfer architecture (dsa.yaml `msa_roofline.transfer_from`), divided by
`dsa_scale_k` (default 1), labelled `xop` — as 0.12.0 transfers it (probed).

Roofline per batch element, for n new tokens after p cached ones (decode: n = 1 over the s - 1 cached keys, which
are then the context length), H query / K kv heads, T = index_topk:
- math: projection GEMMs at the GEMM quant's rate, 2·n·hidden·((H + K)·(qk + v) + index heads·dim); at the bf16
  rate 2·H·(qk + v) per attended (query, key) pair (context: the DSA n²/2 convention plus (qk + v)·H per token;
  decode: the min(s - 1, T) keys only); when the
  context exceeds T, the indexer's 2·index heads·dim per token and context block at the fp8 rate;
- memory: those weights at the GEMM quant's bytes, and per batch element the bf16 q / o activations
  2·H·(qk + v) per token, the KV K·(qk + v) at the KV bytes per key up to T, and the index cache per context block
  when the indexer runs.
"""

from __future__ import annotations

import numpy as np

from perfledger.estimator.errors import EmpiricalUnavailableError, EstimatorError
from perfledger.estimator.ops.dsa.module import DsaContextModuleModel, DsaGenerationModuleModel, _bytes, _config
from perfledger.estimator.ops.dsa.roofline import _pairs


def geometry(architecture: str) -> dict:
    table = _config()["msa_roofline"]
    if architecture not in table:
        raise EstimatorError(f"dsa.yaml msa_roofline: no geometry for architecture {architecture!r}; known: {', '.join(table)}")
    return table[architecture]


def msa_module_sol(g: dict, heads, kv_heads, batch, n, prefix, *, decode: bool, gemm_bytes: float, kv_bytes: float,
                   gemm_flops: float, bf16_flops: float, fp8_flops: float, bw: float):
    """(sol, sol_math, sol_mem) in ms, vectorised over heads / batch / n / prefix (see the module docstring)."""
    h, kv, b, n, p = (np.asarray(a, dtype=np.float64) for a in (heads, kv_heads, batch, n, prefix))
    width, t = g["head_dim"] + g["v_head"], float(g["index_topk"])
    context = p if decode else n + p
    indexer = context > t
    blocks = np.ceil(context / g["block"])
    index = g["index_heads"] * g["index_head_dim"]
    params = g["hidden"] * ((h + kv) * width + index)
    bf16 = 2 * h * width * np.minimum(p, t) if decode else 2 * h * width * _pairs(n, p, t) + width * h * n
    scores = np.where(indexer, 2 * index * n * blocks, 0.0)
    math = b * (2 * n * params / gemm_flops + bf16 / bf16_flops + scores / fp8_flops) * 1000.0
    per_batch = (2 * h * width * n + kv * width * kv_bytes * np.minimum(context, t)
                 + np.where(indexer, g["index_block_bytes"] * blocks, 0.0))
    mem = (gemm_bytes * params + b * per_batch) / bw * 1000.0
    return np.maximum(math, mem), math, mem


class _Msa:
    """What MSA changes of the DSA module op: its rows, roofline, kv heads and the DSA-utilisation transfer."""

    lanes = "msa_module"
    defaults = {"architecture": "MiniMaxM3ForCausalLM", "full_frac": 1.0, "dsa_scale_k": 1.0}
    group_keys = ("system", "backend", "version", "architecture", "kv_quant", "gemm_quant", "kv_heads", "dsa_scale_k",
                  "full_frac")
    transfer: type  # the DSA module op of the same phase

    def _roofline(self, est, key, indexer: str = "full"):
        spec, flops = est.spec(key["system"]), _config()["roofline_quants"]["flops_dtype"]
        kw = dict(decode=self.phase == "generation", gemm_bytes=_bytes(key["gemm_quant"]), kv_bytes=_bytes(key["kv_quant"]),
                  gemm_flops=spec.tc_flops(flops.get(key["gemm_quant"], "bfloat16")),
                  bf16_flops=spec.tc_flops("bfloat16"), fp8_flops=spec.tc_flops("fp8"), bw=spec.mem_bw)
        g = geometry(key["architecture"])
        return lambda h, b, n, p: msa_module_sol(g, h, key["kv_heads"], b, n, p, **kw)[0]

    def empirical(self, est, key, q, shared=False):
        """MSA SOL / (DSA util · k) at the same workload on the transfer architecture's DSA rows."""
        dsa = self.transfer()
        dkey = {**key, "architecture": geometry(key["architecture"])["transfer_from"], "full_frac": 1.0}
        if not shared and not _own_rows(est, dsa.table, dkey):
            raise EmpiricalUnavailableError(f"{self.name}: no {dsa.table} rows of {dkey['architecture']} "
                                            f"(kv {key['kv_quant']}, gemm {key['gemm_quant']}) in "
                                            f"{key['system']}/{key['backend']}/{key['version']} to transfer from")
        try:
            lat, miss = dsa.silicon(est, dkey, q)
        except EstimatorError as exc:
            raise EmpiricalUnavailableError(f"{self.name}: no DSA utilisation to transfer from ({exc})") from None
        if miss.any():
            raise EmpiricalUnavailableError(f"{self.name}: no DSA utilisation to transfer from at "
                                            f"{dsa.describe(dkey, q, int(np.flatnonzero(miss)[0]))}")
        util = dsa.sol(est, dkey, q) / lat
        return self.sol(est, key, q) / (util * float(key["dsa_scale_k"])), "xop"


def _own_rows(est, table: str, key: dict) -> bool:
    """Whether the slice's own version holds the DSA rows (EMPIRICAL borrows from no other version, as 0.12.0)."""
    import polars as pl

    try:
        rows = est.table(key["system"], key["backend"], key["version"], table, shared=False)
    except EstimatorError:
        return False
    return bool(rows.filter(pl.col("architecture") == key["architecture"], pl.col("kv_cache_dtype") == key["kv_quant"],
                            pl.col("gemm_type") == key["gemm_quant"]).height)


class MsaContextModuleModel(_Msa, DsaContextModuleModel):
    name = "msa_context_module"
    tables = ("msa_context_module_perf",)
    transfer = DsaContextModuleModel
    defaults = {**_Msa.defaults, "prefix": 0}


class MsaGenerationModuleModel(_Msa, DsaGenerationModuleModel):
    name = "msa_generation_module"
    tables = ("msa_generation_module_perf",)
    transfer = DsaGenerationModuleModel
