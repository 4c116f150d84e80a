"""Gemma-4 layer plan (`kind` gemma4, language part): banded / global attention, a dense MLP beside a routed MoE.

The op list reproduces what aiconfigurator-core 0.12.0 prices for `Gemma4ForConditionalGeneration` (found from its
per-op breakdown, then checked per op): the config's `layer_types` split the layers into banded (window
`sliding_window`, `head_dim`, `num_key_value_heads`) and global ones (no window, `global_head_dim`,
`num_global_key_value_heads`; with `attention_k_eq_v` the global QKV GEMM has no V part), banded first; every layer
runs the dense MLP (`intermediate_size`) and, on MoE checkpoints, the routed MoE (router GEMM only from
`router_min_experts` experts on; dispatch per gqa.moe_dispatch, under attention DP over every rank's tokens), all in
one `attention` entry and per-type names; no q/k norm, no TP allreduce, no
embedding allreduce; logits bf16 in both phases. Checkpoint exclusions (`exclusions` in models.yaml) keep the
projections, or the MLP and MoE, in bf16. Dense checkpoints run without expert parallelism (refused otherwise,
as 0.12.0 does).
"""

from __future__ import annotations

from dataclasses import dataclass

from perfledger.estimator.errors import EstimatorError, UnsupportedModelError
from perfledger.estimator.fit.roofline import elementwise_bytes
from perfledger.estimator.models.config import ModelConfig
from perfledger.estimator.models.plans.gqa import moe_dispatch
from perfledger.estimator.models.priced import KVGather, PricedModel
from perfledger.estimator.quant.checkpoint import exclusion_globs


@dataclass(frozen=True)
class Gemma4Dims:
    banded_layers: int
    global_layers: int
    window: int
    banded_kv_heads: int
    banded_head_dim: int
    global_kv_heads: int
    global_head_dim: int
    k_eq_v: bool
    projections_bf16: bool  # checkpoint excludes the attention blocks
    mlp_bf16: bool  # checkpoint excludes the MLP (dense MLP and routed experts)


def dims(model: ModelConfig, family: dict) -> Gemma4Dims:
    """Layer split and per-type attention geometry from text_config; bf16 parts from the exclusion globs."""
    t = model.text
    kinds, layers = list(t.get("layer_types") or []), int(t["num_hidden_layers"])
    banded, full = family["layer_types"]["banded"], family["layer_types"]["global"]
    if len(kinds) != layers or set(kinds) - {banded, full}:
        raise EstimatorError(f"{model.path}: layer_types must name {banded} / {full} once per layer ({layers})")
    kv, hd = int(t["num_key_value_heads"]), int(t["head_dim"])
    globs = [g.lower() for g in exclusion_globs(model)]
    ex = family["exclusions"]
    return Gemma4Dims(kinds.count(banded), kinds.count(full), int(t.get("sliding_window") or 0), kv, hd,
                      int(t.get("num_global_key_value_heads") or kv), int(t.get("global_head_dim") or hd),
                      bool(t.get("attention_k_eq_v", False)), any(ex["projections"] in g for g in globs),
                      any(ex["mlp"] in g for g in globs))


def check(m: PricedModel, d, model: ModelConfig) -> None:
    """A dense Gemma-4 has no experts to spread: moe_ep must be 1 (0.12.0 rejects the deployment otherwise)."""
    if not (m.dims.experts and m.dims.topk) and d.moe_ep != 1:
        raise UnsupportedModelError(f"{model.path}: a dense Gemma-4 (no routed experts) needs moe_ep 1, not {d.moe_ep}")


def kv_gathers(m: PricedModel) -> list[KVGather]:
    """Context parallelism's KV all-gathers: one per attention type, K and V both (0.12.0 gathers V even where the
    global layers reuse K, `attention_k_eq_v`)."""
    own = m.plan_dims
    return [KVGather("_swa", own.banded_kv_heads * own.banded_head_dim * 2, own.banded_layers),
            KVGather("_global", own.global_kv_heads * own.global_head_dim * 2, own.global_layers)]


def ops(m: PricedModel, d, tokens: int, context: bool, batch: int, seq: int) -> list[tuple[str, str, dict, float]]:
    """(name, op, query, scale) for one forward pass at `tokens` tokens (scale = layer count of the type)."""
    dims, own, family, tp = m.dims, m.plan_dims, m.family, d.tp
    h = dims.hidden
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    proj_q = "bfloat16" if own.projections_bf16 else d.gemm_quant
    mlp_q = "bfloat16" if own.mlp_bf16 else d.gemm_quant
    gemm = lambda n, k, quant, lp=False: {**base, "quant": quant, "m": tokens, "n": n, "k": k,  # noqa: E731
                                          "low_precision_input": lp}
    mem = lambda dim_in, dim_out: {"bytes": elementwise_bytes(dim_in, dim_out, tokens)}  # noqa: E731
    attn_base = {**base, "kv_quant": d.kv_quant, "batch": batch, "lane_defaults": True, "heads": dims.heads // tp}
    attn_base = ({**attn_base, "fmha_quant": d.fmha_quant, "isl": seq, "qk_norm": False} if context
                 else {**attn_base, "seq": seq})
    inter = dims.inter // tp
    routed = bool(dims.experts and dims.topk)
    moe = {**base, "quant": "bfloat16" if own.mlp_bf16 else d.moe_quant, "distribution": family["distribution"],
           "gated": True, "topk": dims.topk, "experts": dims.experts, "hidden": h, "inter": dims.moe_inter,
           "tp": d.moe_tp, "ep": d.moe_ep, "tokens": tokens * d.attention_dp}
    out = [("embedding", "mem", {"bytes": tokens * h * 2}, 1)]
    for prefix, count, kv_heads, head_dim, window, v_part in (
            ("swa", own.banded_layers, own.banded_kv_heads, own.banded_head_dim, own.window, True),
            ("global", own.global_layers, own.global_kv_heads, own.global_head_dim, 0, not own.k_eq_v)):
        if not count:
            continue
        kv = -(-kv_heads // tp)
        width = dims.heads * head_dim // tp
        out += [(f"{prefix}_attn_norm", "mem", mem(2 * h, 2 * h), count),
                (f"{prefix}_qkv_gemm", "gemm", gemm(width + kv * head_dim * (2 if v_part else 1), h, proj_q), count),
                ("attention", "attention" if context else "generation_attention",
                 {**attn_base, "kv_heads": kv, "head_dim": head_dim, "window": window}, count),
                (f"{prefix}_proj_gemm", "gemm", gemm(h, width, proj_q, True), count),
                (f"{prefix}_ffn_norm", "mem", mem(2 * h, 2 * h), count),
                (f"{prefix}_shared_mlp_gate_up_gemm", "gemm", gemm(2 * inter, h, mlp_q), count),
                (f"{prefix}_shared_mlp_act", "mem", mem(2 * inter, inter), count),
                (f"{prefix}_shared_mlp_down_gemm", "gemm", gemm(h, inter, mlp_q, True), count)]
        if routed:
            if dims.experts >= family["router_min_experts"]:
                out.append((f"{prefix}_router_gemm", "gemm", gemm(dims.experts, h, "bfloat16"), count))
            out += [(f"{prefix}_moe_pre_dispatch", *moe_dispatch(d, tokens, h, "pre"), count),
                    (f"{prefix}_moe", "moe", moe, count),
                    (f"{prefix}_moe_post_dispatch", *moe_dispatch(d, tokens, h, "post"), count)]
    out.append(("logits_gemm", "gemm", {**gemm(dims.vocab // tp, h, "bfloat16"), "m": batch}, 1))
    return out
