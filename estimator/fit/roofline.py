"""Speed-of-light rooflines, vectorised over numpy arrays: SOL = max(math, memory), in ms.

Every function returns (sol, sol_math, sol_mem). Formulas follow the method doc §2: the quant's memory
factor charges all operands, and mem_bw is used unscaled except for table-less memory ops.
"""

from __future__ import annotations

import numpy as np

from perfledger.estimator.data.system_specs import SystemSpec


def _roof(ops, nbytes, flops: float, bw: float):
    math = np.asarray(ops, dtype=np.float64) / flops * 1000.0
    mem = np.asarray(nbytes, dtype=np.float64) / bw * 1000.0
    return np.maximum(math, mem), math, mem


def gemm_sol(m, n, k, memory: float, flops: float, bw: float):
    """M×K · K×N: 2mnk FLOPs; memory(quant) bytes for each of the three matrices."""
    m, n, k = (np.asarray(a, dtype=np.float64) for a in (m, n, k))
    return _roof(2.0 * m * n * k, memory * (m * n + m * k + n * k), flops, bw)


def moe_sol(tokens, hidden, inter, topk, experts, tp, ep, memory: float, flops: float, bw: float, gated=True):
    """One expert-FFN block; integer floor divisions as the reference does; distribution never enters."""
    g = 3 if gated else 2
    t, h, i, tk, e, tp, ep = (np.asarray(a, dtype=np.int64) for a in (tokens, hidden, inter, topk, experts, tp, ep))
    tt = t * tk
    ops = tt * h * i * g * 2 // ep // tp
    tt_ep = tt // ep
    nbytes = memory * (tt_ep * h * 2 + tt_ep * i * g // tp + h * i * g // tp * np.minimum(e // ep, tt_ep))
    return _roof(ops.astype(np.float64), nbytes, flops, bw)


def context_attention_sol(b, s, prefix, heads, kv_heads, head_size, window, kv_memory: float, flops: float, bw: float):
    """Causal prefill attention; a sliding window caps the score matrix when full_s > window."""
    b, s, p, n, nkv, h, w = (np.asarray(a, dtype=np.float64) for a in (b, s, prefix, heads, kv_heads, head_size, window))
    full = s + p
    ops = np.where((w > 0) & (full > w), 2 * b * s * w * n * h * 2, 2 * b * (full**2 - p**2) * n * h * 2 / 2)
    nbytes = 2 * b * (2 * n * s * h) + kv_memory * b * (2 * nkv * full * h)
    return _roof(ops, nbytes, flops, bw)


def encoder_attention_sol(b, s, heads, head_size, flops: float, bw: float):
    """Bidirectional (non-causal) bf16 attention over s tokens per sequence: the full s x s score matrix (QK^T and
    PV, 2 FLOPs per MAC each), Q, K, V and the output read / written once at 2 bytes; no KV cache."""
    b, s, n, h = (np.asarray(a, dtype=np.float64) for a in (b, s, heads, head_size))
    return _roof(4 * b * n * s * s * h, 2 * 4 * b * s * n * h, flops, bw)


def generation_attention_sol(b, s, heads, kv_heads, head_size, window, kv_memory: float, flops: float, bw: float):
    """One decode step reading kv_len = s - 1 cached tokens (capped at the window).

    `flops` is the KV-cache dtype's tensor-core rate (an fp8 cache runs the fp8 MMA).
    """
    b, s, n, nkv, h, w = (np.asarray(a, dtype=np.float64) for a in (b, s, heads, kv_heads, head_size, window))
    kv_len = np.where(w > 0, np.minimum(s - 1, w), s - 1)
    ops = 2 * b * n * h * 2 * kv_len
    nbytes = b * (2 * n * h + 2 * nkv * kv_len * h * kv_memory + 2 * n * h)
    return _roof(ops, nbytes, flops, bw)


def nccl_sol(op: str, elements, num_gpus, memory: float, spec: SystemSpec):
    """Ring collectives: (n-1)/n of the message per GPU over p2p_bw(n); all_reduce moves it twice."""
    size = np.asarray(elements, dtype=np.float64)
    n = np.asarray(num_gpus, dtype=np.int64)
    bw = np.vectorize(spec.p2p_bw, otypes=[np.float64])(n)
    factor = 2.0 if op == "all_reduce" else 1.0
    mem = factor * memory * size * (n - 1) / n / bw * 1000.0
    return mem, np.zeros_like(mem), mem


def custom_allreduce_sol(elements, tp, spec: SystemSpec):
    """bf16 ring allreduce inside a node."""
    size = np.asarray(elements, dtype=np.float64)
    tp = np.asarray(tp, dtype=np.int64)
    bw = np.vectorize(spec.p2p_bw, otypes=[np.float64])(tp)
    mem = 2 * size * 2 / tp * (tp - 1) / bw * 1000.0
    return mem, np.zeros_like(mem), mem


def mem_op_latency(nbytes, spec: SystemSpec):
    """Table-less memory ops (elementwise, norms, embedding): scaled bandwidth plus a constant."""
    nbytes = np.asarray(nbytes, dtype=np.float64)
    return (nbytes / (spec.mem_bw * spec.mem_bw_scaling) + spec.mem_const_latency) * 1000.0


def mem_op_sol(nbytes, spec: SystemSpec):
    """The same memory ops in SOL mode: bytes at the unscaled bandwidth, no constant (0.12.0's SOL, probed)."""
    return np.asarray(nbytes, dtype=np.float64) / spec.mem_bw * 1000.0


def elementwise_bytes(dim_in, dim_out, tokens):
    return 2.0 * (np.asarray(dim_in, dtype=np.float64) + dim_out) * tokens


def context_mla_sol(b, s, heads, kv_memory: float, dims: dict, flops: float, bw: float):
    """Causal MLA prefill: b·n·s²·(qk + v) FLOPs; q/o at 2 B and k/v at the cache's bytes per element."""
    b, s, n = (np.asarray(a, dtype=np.float64) for a in (b, s, heads))
    width = dims["qk_head_dim"] + dims["v_head_dim"]
    ops = b * n * s**2 * width
    nbytes = b * s * n * width * (2.0 + kv_memory)
    return _roof(ops, nbytes, flops, bw)


def generation_mla_sol(b, s, heads, kv_memory: float, dims: dict, flops: float, bw: float):
    """Absorbed MLA decode at sequence length s: 2·b·n·s·(latent+v) FLOPs; q/o per head plus s−1 cached latents."""
    b, s, n = (np.asarray(a, dtype=np.float64) for a in (b, s, heads))
    width = dims["kv_latent_dim"] + dims["v_latent_dim"]
    ops = 2 * b * n * s * width
    nbytes = b * (2 * n * width + kv_memory * dims["kv_latent_dim"] * (s - 1))
    return _roof(ops, nbytes, flops, bw)


def wide_ep_context_mla_sol(b, s, heads, g: dict, memory: float, gemm_flops: float, attn_flops: float, bw: float):
    """SGLang's wide-EP MLA module in prefill (no cached prefix): the q_b, kv_b and o projections at the module's GEMM
    rate plus causal attention over s tokens at `attn_flops`; projection traffic once, attention traffic twice, every
    element at `memory` bytes (the qkv_a projection is its own op). `g`: mla.yaml `wide_ep` geometry."""
    b, s, n = (np.asarray(a, dtype=np.float64) for a in (b, s, heads))
    qk, kv = g["rope"] + g["nope"], g["nope"] + g["v"]
    proj_ops = (2 * g["q_lora"] * n * qk * b * s + 2 * g["kv_lora"] * n * kv * b * s + 2 * n * g["v"] * g["hidden"] * b * s)
    attn_ops = n * (2 * g["nope"] + g["rope"]) * b * (s * s)
    proj_bytes = (b * g["q_lora"] * s + g["q_lora"] * n * qk + 2 * b * n * qk * s
                  + b * s * g["kv_lora"] + n * kv * g["kv_lora"] + 2 * b * n * kv * s
                  + b * n * g["v"] * s + n * g["v"] * g["hidden"] + 2 * b * g["hidden"] * s)
    attn_bytes = 2 * b * s * n * qk + 2 * b * s * n * g["nope"]
    math = proj_ops / gemm_flops * 1000.0 + attn_ops / attn_flops * 1000.0
    mem = (proj_bytes + 2 * attn_bytes) * memory / bw * 1000.0
    return np.maximum(math, mem), math, mem


def wide_ep_generation_mla_sol(b, s, heads, g: dict, memory: float, gemm_flops: float, attn_flops: float, bw: float):
    """SGLang's wide-EP MLA module in decode: the q_b projection, the absorbed k / v BMMs and the o projection at the
    module's GEMM rate plus attention over s cached latents at `attn_flops`; the attention traffic counted twice."""
    b, s, n = (np.asarray(a, dtype=np.float64) for a in (b, s, heads))
    qk, lora, rope = g["rope"] + g["nope"], g["kv_lora"], g["rope"]
    proj_ops = (2 * g["q_lora"] * n * qk * b + 2 * n * g["nope"] * lora * b + 2 * b * n * lora * g["v"]
                + 2 * n * g["v"] * g["hidden"] * b)
    attn_ops = 2 * b * s * n * (rope + 2 * lora)
    proj_bytes = (b * g["q_lora"] + g["q_lora"] * n * qk + 2 * b * n * qk
                  + b * n * g["nope"] + n * lora * g["nope"] + 2 * b * n * lora
                  + b * n * lora + n * g["v"] * lora + 2 * b * n * g["v"]
                  + b * n * g["v"] + n * g["v"] * g["hidden"] + 2 * b * g["hidden"])
    attn_bytes = b * n * (lora + rope) + b * s * (rope + lora) + b * n * lora
    math = proj_ops / gemm_flops * 1000.0 + attn_ops / attn_flops * 1000.0
    mem = (proj_bytes + 2 * attn_bytes) * memory / bw * 1000.0
    return np.maximum(math, mem), math, mem


def mla_bmm_sol(tokens, heads, memory: float, dims: dict, flops: float, bw: float):
    """Per-head [t×128]·[128×512] batched GEMM: the weight once plus each token's input and output."""
    t, n = (np.asarray(a, dtype=np.float64) for a in (tokens, heads))
    r, h = dims["bmm_rank"], dims["bmm_head_dim"]
    ops = 2 * t * n * r * h
    nbytes = memory * n * (r * h + t * (r + h))
    return _roof(ops, nbytes, flops, bw)


def kda_sol(forms, batch, seq, v_heads, head_k, head_v, d_conv, chunk: int, bw: float):
    """KDA kernels, memory only: `recurrent` = fp32 state per started chunk + 5 bf16 vectors per token;
    `conv` = 3·hv channels × (2·d_conv + 4) bytes per token; both per (batch, v-head)."""
    b, s, n, hk, hv, dc = (np.asarray(a, dtype=np.float64) for a in (batch, seq, v_heads, head_k, head_v, d_conv))
    nbytes = np.zeros(np.broadcast(b, s, n).shape)
    if "recurrent" in forms:
        nbytes = nbytes + b * n * ((s // chunk + 1) * 8 * hk * hv + 10 * hv * s)
    if "conv" in forms:
        nbytes = nbytes + b * s * 3 * n * hv * (2 * dc + 4)
    mem = nbytes / bw * 1000.0
    return mem, np.zeros_like(mem), mem


def gdn_sol(forms, batch, seq, k_heads, v_heads, head_k, head_v, d_conv, chunk: int, state_bytes: float, bw: float):
    """Gated DeltaNet kernels, memory only: `recurrent` = the hk×hv state (state_bytes each) read and written once
    per v-head, 4 bytes per hk×hv per completed chunk, 4 bytes per q/k/v element per token; `conv` = the
    2·nk·hk + nv·hv channels × (2·d_conv + 4) bytes per token."""
    b, s, nk, nv, hk, hv, dc = (np.asarray(a, dtype=np.float64)
                                for a in (batch, seq, k_heads, v_heads, head_k, head_v, d_conv))
    nbytes = np.zeros(np.broadcast(b, s, nk, nv).shape)
    if "recurrent" in forms:
        nbytes = nbytes + b * (nv * hk * hv * (2 * state_bytes + 4 * (s // chunk)) + 4 * s * (nk * hk + nv * hv))
    if "conv" in forms:
        nbytes = nbytes + b * s * (2 * nk * hk + nv * hv) * (2 * dc + 4)
    mem = nbytes / bw * 1000.0
    return mem, np.zeros_like(mem), mem


def mamba2_sol(form: str, tokens, nheads: int, head_dim: int, d_state: int, d_conv: int, n_groups: int, bw: float):
    """Mamba-2 kernels, memory only (ops/mamba2.yaml): `conv` = (nheads·head_dim + 2·n_groups·d_state) channels ×
    (2·d_conv + 4) bytes per token; `scan` = 4·nheads·head_dim + 2·nheads + 4·n_groups·d_state bytes per token."""
    t = np.asarray(tokens, dtype=np.float64)
    if form == "conv":
        per_token = (nheads * head_dim + 2 * n_groups * d_state) * (2 * d_conv + 4)
    elif form == "scan":
        per_token = 4 * nheads * head_dim + 2 * nheads + 4 * n_groups * d_state
    else:
        raise ValueError(f"mamba2: unknown roofline form {form!r} (conv or scan)")
    mem = t * per_token / bw * 1000.0
    return mem, np.zeros_like(mem), mem
