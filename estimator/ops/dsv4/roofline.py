"""DeepSeek-V4 rooflines (ms): the compressed-attention module and the mHC pre / post module, as 0.12.0 prices them.

Attention, per phase (context: b·s new tokens after `prefix`; decode: b tokens at kv length s − 1):
- GEMM-quant math: q_a / q_b / kv / grouped o projections, the compressors (2× head dim for CSA, plus the
  indexer's two compressors at the index head dim); bf16 math: the o absorption and the indexer weights
  GEMM; fp8 math: the indexer scoring (q_lora × index heads × index dim per token, index heads × dim per
  (token, compressed key)); FMHA-quant math: 4 · heads · head_dim per attended pair (window pairs + compressed
  pairs, CSA capped at index_topk, HCA at kv // ratio);
- memory: weights (GEMM quant; o absorption and indexer weights bf16), activations, the KV once per attended
  pair (one head_dim entry shared by all heads), the FP4 indexer cache and the rope activations.
mHC: both decoder sites (attention and FFN) of one layer; pre = mixing GEMM + Sinkhorn + apply, post = combine.
"""

from __future__ import annotations

import numpy as np


def _sum_floor(n, d):
    """sum_{i=0..n} floor(i / d) (0 for n < 0)."""
    n = np.asarray(n, dtype=np.int64)
    q, r = n // d, n % d
    return np.where(n < 0, 0, d * q * (q - 1) // 2 + q * (r + 1))


def causal_pairs(b, q, prefix, limit):
    """Attended pairs when query i (of q, after prefix) sees min(prefix + i + 1, limit) keys, times batch."""
    b, q, p, lim = (np.asarray(a, dtype=np.int64) for a in (b, q, prefix, limit))
    full = p + q
    ramp = (np.minimum(full, lim) * (np.minimum(full, lim) + 1) - np.minimum(p, lim) * (np.minimum(p, lim) + 1)) // 2
    out = ramp + np.maximum(full - np.maximum(p, lim), 0) * lim
    return np.where((lim <= 0) | (q <= 0), 0, b * out)


def compressed_pairs(b, q, prefix, ratio: int, limit):
    """Pairs when query at position j sees floor(j / ratio) compressed entries, capped at `limit`, times batch."""
    b, q, p, lim = (np.asarray(a, dtype=np.int64) for a in (b, q, prefix, limit))
    start, end, sat = p + 1, p + q, lim * ratio
    below = _sum_floor(end, ratio) - _sum_floor(start - 1, ratio)
    ramp = _sum_floor(sat - 1, ratio) - _sum_floor(start - 1, ratio) + (end - sat + 1) * lim
    total = np.where(end < sat, below, np.where(start >= sat, q * lim, ramp))
    return np.where((q <= 0) | (lim <= 0), 0, b * total)


def attention_sol(g: dict, *, context: bool, b, s, prefix, ratio: int, rates: dict, sizes: dict, bw: float):
    """(sol, math, mem) in ms, vectorised over b / s / prefix. `g`: heads (local), hidden, q_lora, o_lora,
    head_dim, rope_dim, index_heads, index_head_dim, index_topk, window, o_groups (local), index_cache_per_dim.
    `rates`: FLOP/s per operand (gemm, bf16, fp8, fmha); `sizes`: bytes per element (gemm, bf16, kv, fmha)."""
    b, s, prefix = (np.asarray(a, dtype=np.int64) for a in (b, s, prefix))
    h, hid, ql, ol, hd = g["heads"], g["hidden"], g["q_lora"], g["o_lora"], g["head_dim"]
    ih, idim, groups = g["index_heads"], g["index_head_dim"], max(1, g["o_groups"])
    tokens = b * s if context else b
    kv_len = prefix + s if context else np.maximum(0, s - 1)
    proj = 2 * tokens * (hid * ql + ql * h * hd + hid * hd + groups * ol * hid)
    absorb = 2 * tokens * h * hd * ol
    mult = 2 if ratio == 4 else 1
    comp = 0
    if ratio:
        comp = 4 * tokens * hid * mult * hd + 2 * tokens * mult * hd
        if ratio == 4:
            comp = comp + 4 * tokens * hid * 2 * idim + 2 * tokens * 2 * idim
    limit = g["index_topk"] if ratio == 4 else np.maximum(0, kv_len // max(ratio, 1))
    if context:
        window = causal_pairs(b, s, prefix, g["window"])
        compressed = compressed_pairs(b, s, prefix, ratio, limit) if ratio else 0
    else:
        window = b * np.minimum(kv_len, g["window"])
        compressed = b * np.minimum(kv_len // ratio, limit) if ratio else 0
    pairs = window + compressed
    attn = 4 * h * hd * pairs
    index_fp8 = index_bf16 = index_cache = 0
    if ratio == 4:
        clen = kv_len // ratio
        qtok = b * s if context else b
        index_fp8 = 2 * qtok * ql * ih * idim + 2 * qtok * clen * ih * idim
        index_bf16 = 2 * qtok * hid * ih
        index_cache = b * clen * idim * g["index_cache_per_dim"]
    gemm_w = (hid * ql + ql * h * hd + hid * hd + groups * ol * hid) * sizes["gemm"]
    bf16_w = h * hd * ol * sizes["bf16"]
    if ratio:
        gemm_w += 2 * hid * mult * hd * sizes["gemm"]
    if ratio == 4:
        gemm_w += ql * ih * idim * sizes["gemm"]
        bf16_w += hid * ih * sizes["bf16"]
    act = tokens * (hid + ql + h * hd + hd + groups * ol) * sizes["gemm"]
    kv = pairs * hd * sizes["kv"]
    rope = tokens * h * g["rope_dim"] * sizes["fmha"]
    math = ((proj + comp) / rates["gemm"] + (absorb + index_bf16) / rates["bf16"] + index_fp8 / rates["fp8"]
            + attn / rates["fmha"]) * 1000.0
    mem = (gemm_w + bf16_w + act + kv + index_cache + rope) / bw * 1000.0
    math, mem = np.asarray(math, dtype=np.float64), np.asarray(mem, dtype=np.float64)
    return np.maximum(math, mem), math, mem


def mhc_sol(tokens, *, phase: str, hidden: int, hc_mult: int, sinkhorn_iters: int, flops: float, elem_bytes: float,
            bw: float):
    """(sol, math, mem) in ms of one layer's two mHC sites at `tokens` tokens; phase pre | post."""
    nt = np.asarray(tokens, dtype=np.float64)
    sites, hc_dim, mix = 2, hc_mult * hidden, (2 + hc_mult) * hc_mult
    if phase == "pre":
        ops = sites * (2 * nt * hc_dim * mix + nt * hc_dim * 3 + nt * (hc_mult * hc_mult + 2 * hc_mult) * sinkhorn_iters
                       + 2 * nt * hc_mult * hidden)
    elif phase == "post":
        ops = sites * (2 * nt * hc_mult * hc_mult * hidden + 2 * nt * hc_mult * hidden)
    else:
        raise ValueError(f"mHC phase {phase!r}: expected pre or post")
    params = sites * (mix * hc_dim + mix + 3) * elem_bytes
    act = sites * nt * hc_dim * elem_bytes * 2 + (sites * nt * (2 * hc_mult + hc_mult * hc_mult) * 4 if phase == "pre" else 0)
    math = ops / flops * 1000.0
    mem = (params + act) / bw * 1000.0
    return np.maximum(math, mem), math, mem
