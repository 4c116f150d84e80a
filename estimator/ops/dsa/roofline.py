"""DSA module roofline (ms), as 0.12.0 prices the whole sparse-attention block; found by probing its SOL.

Per batch element, for n new tokens after p cached ones (full = n + p), T = index_topk:
- math: the block's projection GEMMs at the GEMM quant's rate (unsharded q_a / kv_a / indexer weights,
  per-head q_b / kv_b / o), plus at the bfloat16 rate the absorbed latent work per token and head,
  2·(latent + kv_lora) per attended (query, key) pair and head — each query attends min(position, T)
  keys, n·p + n²/2 when full ≤ T — and at the fp8 rate the indexer's 2·heads·dim per (query, key) of the
  full context when the indexer runs (context: only when full > T and not a skip-indexer layer; decode: always);
  where fp8 is exactly twice bf16 the two rates agree; l40s (733 / 362.05 TFLOP/s) told them apart;
- memory: weights at the GEMM quant's bytes (per-head q_b and o only), and per batch element —
  context: q/o activations 2·(qk + v) per token and head, the latent KV per head at min(full, T) keys,
  the indexer cache entry per key when the indexer runs; decode: the latent KV once at min(s, T) keys and
  the indexer cache entry per key.
Geometry per architecture is data (dsa.yaml `roofline`); decode is the n = 1, p = s − 1 case.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import yaml


@cache
def geometry(architecture: str) -> dict:
    table = yaml.safe_load(Path(__file__).with_name("dsa.yaml").read_text())["roofline"]
    if architecture not in table:
        from perfledger.estimator.errors import EstimatorError

        raise EstimatorError(f"dsa.yaml roofline: no geometry for architecture {architecture!r}; known: {', '.join(table)}")
    g = table[architecture]
    qk = g["nope"] + g["rope"]
    return {**g, "latent": g["kv_lora"] + g["rope"],
            "shared_params": g["hidden"] * (g["q_lora"] + g["kv_lora"] + g["rope"] + g["index_head_dim"] + g["index_heads"])
            + g["q_lora"] * g["index_heads"] * g["index_head_dim"],
            "head_gemm_params": g["q_lora"] * qk + g["kv_lora"] * (g["nope"] + g["v_head"]) + g["v_head"] * g["hidden"],
            "head_weight_params": g["q_lora"] * qk + g["v_head"] * g["hidden"],
            "act_bytes": 2 * (qk + g.get("o_act_dim", g["v_head"])), "index_flops": 2 * g["index_heads"] * g["index_head_dim"]}


def _pairs(n, p, t):
    """Attended (query, key) pairs, each query at position j seeing min(j, T) keys (n²/2 convention)."""
    m = np.clip(t - p, 0, n)  # queries still in the dense part
    return m * p + m * m / 2 + t * (n - m) - (n - m) / 2


def dsa_module_sol(architecture: str, heads, batch, n, prefix, *, decode: bool, gemm_bytes: float, kv_bytes: float,
                   gemm_flops: float, bf16_flops: float, fp8_flops: float, bw: float, skip_indexer: bool = False):
    """(sol, sol_math, sol_mem) in ms, vectorised over heads/batch/n/prefix.

    `skip_indexer` (GLM-5.2 shared-index layers) drops the indexer terms in context only: 0.12.0 prices the
    decode skip rows with the full decode roofline.
    """
    g = geometry(architecture)
    h, b, n, p = (np.asarray(a, dtype=np.float64) for a in (heads, batch, n, prefix))
    full, t = n + p, float(g["index_topk"])
    indexer = np.full(full.shape, True) if decode else (full > t) & (not skip_indexer)
    gemm = (g["shared_params"] + g["head_gemm_params"] * h) * 2 * n
    width = g["latent"] + g["kv_lora"]
    bf16 = width * h * n + 2 * width * h * _pairs(n, p, t)
    scores = np.where(indexer, g["index_flops"] * n * full, 0.0)
    math = b * (gemm / gemm_flops + bf16 / bf16_flops + scores / fp8_flops) * 1000.0
    weights = gemm_bytes * (g["shared_params"] + g["head_weight_params"] * h)
    latent = g["latent"] * kv_bytes * np.minimum(full, t)
    index_cache = np.where(indexer, g["index_cache_bytes"] * full, 0.0)
    per_batch = latent + index_cache if decode else g["act_bytes"] * h * n + latent * h + index_cache
    mem = (weights + b * per_batch) / bw * 1000.0
    return np.maximum(math, mem), math, mem
