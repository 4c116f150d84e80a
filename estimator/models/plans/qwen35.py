"""Qwen3.5 / Qwen3.5-MoE static layer plan (`kind` qwen35): Gated DeltaNet and gated full-attention layers, each with a
dense SwiGLU or a routed MoE + gated shared-expert FFN, as aiconfigurator-core 0.12.0 prices them.

The op list (names, shapes, repeat counts) reproduces 0.12.0's QWEN35 model, found from its per-op breakdown and then
checked op by op (benchmarks/static_parity.py): the config's `layer_types` split the layers into `gdn` (linear
attention: in_proj qkvz / ba GEMMs, the GDN conv + scan kernels of `ops/gdn.py`, out_proj) and `full` (q doubled by
the output gate, qk-normed GQA attention) types, each type's ops repeated by its layer count and followed by its
FFN. The MoE FFN: router GEMM (bf16, 128+ experts), the MoE dispatch / combine as the custom allreduce on the MoE
group (sglang's default dispatcher has no pre-dispatch collective), the shared expert (sglang fuses its scalar gate
into the merge kernel; vLLM / trtllm run a gate GEMV and multiply), in decode overlapped with the routed branch on
vLLM and sglang (the slower stream counts). GEMM quants per category (projection, dense FFN, shared expert) follow
the checkpoint's per-layer metadata, else its exclusions keep a category bf16 (`gemm_quants`).
"""

from __future__ import annotations

from dataclasses import dataclass

from perfledger.estimator.errors import EstimatorError, UnsupportedModelError
from perfledger.estimator.fit.roofline import elementwise_bytes
from perfledger.estimator.models.config import ModelConfig
from perfledger.estimator.models.plans.gqa import moe_dispatch
from perfledger.estimator.models.priced import PricedModel

# ModelOpt per-layer algorithm -> GEMM quant, and the target markers of each GEMM category
ALGOS = {"fp8": "fp8_static", "e4m3": "fp8_static", "e5m2": "fp8_static", "mxfp8": "fp8", "nvfp4": "nvfp4",
         "fp4": "nvfp4", "w4a16_nvfp4": "w4a16_nvfp4"}


@dataclass(frozen=True)
class Qwen35Dims:
    """Layer split, GDN geometry, shared-expert width and the checkpoint's GEMM quant per category (None: the
    deployment's GEMM quant)."""

    gdn_layers: int
    full_layers: int
    k_heads: int
    v_heads: int
    head_k: int
    head_v: int
    d_conv: int
    shared_inter: int
    state_dtype: str  # mamba_ssm_dtype (text_config first), float32 unless declared
    state_bytes: int  # bytes per recurrent-state element (memory.yaml's GDN state per request)
    projection_quant: str | None
    dense_quant: str | None
    shared_quant: str | None


def dims(model: ModelConfig, family: dict) -> Qwen35Dims:
    t = model.text
    kinds = list(t.get("layer_types") or [])[: int(t["num_hidden_layers"])]
    if len(kinds) != int(t["num_hidden_layers"]):
        raise EstimatorError(f"{model.path}: layer_types holds {len(kinds)} entries for {t['num_hidden_layers']} layers")
    state = "float32"
    for section in (t, model.config):
        if "mamba_ssm_dtype" in section:
            state = section["mamba_ssm_dtype"] if section["mamba_ssm_dtype"] in ("float32", "bfloat16", "float16") \
                else "float32"
            break
    quants = gemm_quants(model)
    return Qwen35Dims(kinds.count("linear_attention"), kinds.count("full_attention"), int(t["linear_num_key_heads"]),
                      int(t["linear_num_value_heads"]), int(t["linear_key_head_dim"]), int(t["linear_value_head_dim"]),
                      int(t["linear_conv_kernel_dim"]), int(t.get("shared_expert_intermediate_size") or 0), state,
                      4 if state == "float32" else 2,
                      quants["projection"], quants["dense_ffn"], quants["shared_expert"])


def gemm_quants(model: ModelConfig) -> dict[str, str | None]:
    """Per GEMM category the checkpoint's explicit per-layer algorithm, else bf16 where its exclusions name the
    category, else None (the deployment's GEMM quant)."""
    from perfledger.estimator.quant.checkpoint import exclusion_globs

    out: dict[str, str | None] = {"projection": None, "dense_ffn": None, "shared_expert": None}
    explicit = set()
    maps = [model.hf_quant.get("quantized_layers"), (model.config.get("quantization_config") or {}).get("quantized_layers")]
    for layers in maps:
        for target, meta in (layers.items() if isinstance(layers, dict) else ()):
            algo = (meta.get("quant_algo") or meta.get("quantization_algo") or meta.get("quant_method")) \
                if isinstance(meta, dict) else meta
            quant = ALGOS.get(str(algo).strip().lower()) if algo else None
            name = str(target).lower()
            routed = "shared_expert" not in name and (".experts." in name or name.endswith(".experts")
                                                      or "routing_expert" in name)
            category = ("projection" if ".linear_attn." in name or ".self_attn." in name else
                        "shared_expert" if "shared_expert" in name else
                        "dense_ffn" if ".mlp." in name and not routed else None)
            if quant is not None and category is not None:
                out[category] = quant
                explicit.add(category)
    globs = [g.lower() for g in exclusion_globs(model)]
    if "projection" not in explicit and any("linear_attn" in g or "self_attn" in g for g in globs):
        out["projection"] = "bfloat16"
    if "shared_expert" not in explicit and any("shared_expert" in g for g in globs):
        out["shared_expert"] = "bfloat16"
    if "dense_ffn" not in explicit and any(".mlp" in g and "shared_expert" not in g for g in globs):
        out["dense_ffn"] = "bfloat16"
    return out


def check(m: PricedModel, d, model: ModelConfig) -> None:
    """GDN k / v head counts must split evenly over TP (0.12.0 refuses the deployment otherwise)."""
    own = m.plan_dims
    if own.k_heads % d.tp or own.v_heads % d.tp:
        raise UnsupportedModelError(f"{model.path}: Qwen3.5 GDN head counts must both be divisible by tp {d.tp}: "
                                    f"linear_num_key_heads={own.k_heads}, linear_num_value_heads={own.v_heads}")


def ops(m: PricedModel, d, tokens: int, context: bool, batch: int, seq: int) -> list[tuple[str, str, dict, float]]:
    """(name, op, query, scale) for one forward pass at `tokens` tokens (scale = the layer type's count)."""
    dims, own, tp = m.dims, m.plan_dims, d.tp
    h = dims.hidden
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    gemm = lambda n, k, quant, lp=False, below=False: {  # noqa: E731
        **base, "quant": quant or d.gemm_quant, "m": tokens, "n": n, "k": k, "low_precision_input": lp, "below_grid_sol": below}
    mem = lambda dim_in, dim_out: {"bytes": elementwise_bytes(dim_in, dim_out, tokens)}  # noqa: E731
    ar = {**base, "tp": tp, "elements": tokens * h}
    phase = "context" if context else "generation"
    proj = own.projection_quant
    out = [("embedding", "mem", {"bytes": tokens * h * 2}, 1), ("embedding_ar", "allreduce", ar, 1)]
    # the attention output's TP allreduce (none where attention DP's dispatch collectives take its place)
    attn_ar = [] if d.attention_dp > 1 and d.backend in m.family["attention_dp"]["no_attention_allreduce"] else [ar]
    if c := own.gdn_layers:
        nk, nv = own.k_heads // tp, own.v_heads // tp
        kernel = {**base, "phase": phase, "d_model": h, "heads": nk, "v_heads": nv, "head_k_dim": own.head_k,
                  "head_v_dim": own.head_v, "d_conv": own.d_conv, "state_dtype": own.state_dtype, "batch": batch,
                  "seq": seq if context else 1}
        conv, state = (("causal_conv1d_fn", "chunk_gated_delta_rule") if context
                       else ("causal_conv1d_update", "fused_sigmoid_gating_delta_rule_update"))
        out += [("gdn_norm", "mem", mem(2 * h, 2 * h), c),
                ("gdn_in_proj_gemm", "gemm", gemm(2 * (nk * own.head_k + nv * own.head_v), h, proj), c),
                ("gdn_in_proj_ba_gemm", "gemm", gemm(2 * nv, h, proj, below=True), c),
                ("gdn_conv1d", "gdn_kernel", {**kernel, "kernel": conv}, c),
                ("gdn_scan" if context else "gdn_recurrence", "gdn_kernel", {**kernel, "kernel": state}, c),
                ("gdn_out_proj_gemm", "gemm", gemm(h, nv * own.head_v, proj, True), c)]
        out += [("gdn_ar", "allreduce", q, c) for q in attn_ar]
        out += _ffn(m, d, "gdn", c, context, tokens, gemm, mem, ar)
    if c := own.full_layers:
        heads, kv_heads, hd = dims.heads // tp, -(-dims.kv_heads // tp), dims.head_dim
        attn = {**base, "kv_quant": d.kv_quant, "head_dim": hd, "window": 0, "kv_heads": kv_heads, "heads": heads,
                "batch": batch, "lane_defaults": True}
        attn = ({**attn, "fmha_quant": d.fmha_quant, "isl": seq, "qk_norm": True} if context else {**attn, "seq": seq})
        out += [("full_attn_norm", "mem", mem(2 * h, 2 * h), c),
                ("qkv_gemm", "gemm", gemm(2 * heads * hd + 2 * kv_heads * hd, h, proj), c),
                ("attention", "attention" if context else "generation_attention", attn, c),
                ("proj_gemm", "gemm", gemm(h, heads * hd, proj, True), c)]
        out += [("full_ar", "allreduce", q, c) for q in attn_ar]
        out += _ffn(m, d, "full", c, context, tokens, gemm, mem, ar)
    out.append(("logits_gemm", "gemm", {**gemm(dims.vocab // tp, h, "bfloat16"), "m": batch}, 1))
    return out


def _ffn(m: PricedModel, d, prefix: str, count: int, context: bool, tokens: int, gemm, mem, ar) -> list:
    """One layer type's FFN: dense SwiGLU, or router + dispatch + MoE + combine with the gated shared expert."""
    dims, own, tp, h = m.dims, m.plan_dims, d.tp, m.dims.hidden
    out = [(f"{prefix}_ffn_norm", "mem", mem(2 * h, 2 * h), count)]
    if not dims.experts:
        inter = dims.inter // tp
        return out + [(f"{prefix}_gate_ffn1_gemm", "gemm", gemm(2 * inter, h, own.dense_quant), count),
                      (f"{prefix}_act_gate", "mem", mem(2 * inter, inter), count),
                      (f"{prefix}_ffn2_gemm", "gemm", gemm(h, inter, own.dense_quant, True), count),
                      (f"{prefix}_ffn_ar", "allreduce", ar, count)]
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    dispatch = {**base, "tp": d.moe_tp * d.moe_ep, "elements": tokens * h}
    moe = {**base, "quant": d.moe_quant, "distribution": m.family["distribution"], "gated": True, "topk": dims.topk,
           "experts": dims.experts, "hidden": h, "inter": dims.moe_inter, "tp": d.moe_tp, "ep": d.moe_ep,
           "tokens": tokens * d.attention_dp}
    routed = [(f"{prefix}_router_gemm", "gemm", gemm(dims.experts, h, "bfloat16"), count)] if dims.experts >= 128 else []
    pre = m.family["pre_dispatch"].get(d.backend)  # moe_group: the MoE width's allreduce; free: reported at 0 ms
    dp_rules, serial_pre = m.family["attention_dp"], []
    if d.attention_dp > 1:
        pre_op = (f"{prefix}_moe_pre_dispatch", *moe_dispatch(
            d, tokens, h, "pre", attention_tp=d.backend not in dp_rules["pre_without_attention_tp"]), count)
        (serial_pre if d.backend in dp_rules["serial_pre_dispatch"] else routed).append(pre_op)
    elif pre is not None:
        routed.append((f"{prefix}_moe_pre_dispatch", "allreduce", dispatch if pre == "moe_group" else {**dispatch, "tp": 1},
                       count))
    routed.append((f"{prefix}_moe", "moe", moe, count))
    shared = []
    if own.shared_inter:
        inter, sq = own.shared_inter // tp, own.shared_quant
        fused_gate = d.backend in m.family["fused_shared_gate"]
        shared = [] if fused_gate else [(f"{prefix}_shared_expert_gate_gemm", "gemm", gemm(1, h, "bfloat16", below=True), count)]
        shared += [(f"{prefix}_shared_gate_up_gemm", "gemm", gemm(2 * inter, h, sq), count),
                   (f"{prefix}_shared_act_gate", "mem", mem(2 * inter, inter), count),
                   (f"{prefix}_shared_down_gemm", "gemm", gemm(h, inter, sq, True), count)]
        shared += [] if fused_gate else [(f"{prefix}_shared_expert_gate_mul", "mem", mem(h, h), count)]
    if shared and not context and d.backend in m.family["decode_overlap"]:
        out += serial_pre + [(f"{prefix}_moe_overlap", "overlap", {"groups": [routed, shared]}, 1)]
    else:
        out += serial_pre + routed + shared
    if own.shared_inter:
        merged = 3 * h if d.backend in m.family["fused_shared_gate"] else 2 * h  # the fused kernel reads hidden too
        out.append((f"{prefix}_shared_merge", "mem", mem(merged, h), count))
    post = moe_dispatch(d, tokens, h, "post") if d.attention_dp > 1 else ("allreduce", dispatch)
    return out + [(f"{prefix}_moe_post_dispatch", *post, count)]
