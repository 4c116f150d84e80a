"""Kimi-K3 static layer plan: KDA and MLA attention layers, attention residuals, one dense and many latent-MoE FFNs.

The op list (names, shapes, repeat counts) reproduces what aiconfigurator-core 0.12.0 prices for
`KimiK3ForConditionalGeneration`, found by reading its per-op breakdown and the shapes in its compiled op
spec: 69 KDA + 24 MLA layers (config `linear_attn_config`), every layer two attention-residual mem ops,
`first_k_dense_replace` dense FFN layers and a latent MoE (hidden → routed_expert_hidden_size → hidden,
RMS-normed at the latent width) on the rest. `m` is `dims` merged with the `models.yaml` family (kernels,
routing, MoE quant, and per backend the MLA form and KDA kernels: `backends`); quants otherwise come from the
deployment.
"""

from __future__ import annotations

from perfledger.estimator.fit.roofline import elementwise_bytes
from perfledger.estimator.models.config import ModelConfig


def dims(model: ModelConfig, family: dict) -> dict:
    """Layer counts and widths from the HF config's text_config (the block the reference reads)."""
    t = model.config.get("text_config", model.config)
    lin = t["linear_attn_config"]
    dense = int(t.get("first_k_dense_replace", 0))
    return {"hidden": t["hidden_size"], "inter": t["intermediate_size"], "layers": t["num_hidden_layers"],
            "kda_layers": len(lin["kda_layers"]), "mla_layers": len(lin["full_attn_layers"]),
            "kda_heads": lin["num_heads"], "kda_head_dim": lin["head_dim"], "d_conv": lin["short_conv_kernel_size"],
            "heads": t["num_attention_heads"], "q_lora": t["q_lora_rank"], "kv_lora": t["kv_lora_rank"],
            "rope_dim": t["qk_rope_head_dim"], "nope_dim": t["qk_nope_head_dim"], "v_head_dim": t["v_head_dim"],
            "dense_layers": dense,
            "moe_layers": t["num_hidden_layers"] - dense, "experts": t["num_experts"],
            "topk": t["num_experts_per_token"], "moe_inter": t["moe_intermediate_size"],
            "latent": t["routed_expert_hidden_size"], "shared": t["num_shared_experts"], "vocab": t["vocab_size"],
            "attn_res_block": t["attn_res_block_size"]}


def ops(m: dict, d, tokens: int, context: bool, batch: int, seq: int) -> list[tuple[str, str, dict, float]]:
    """(name, op, query, scale) for one K3 forward pass at `tokens` tokens (scale = layer count)."""
    h, tp, L = m["hidden"], d.tp, m["layers"]
    plan = m["backends"][d.backend]
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    gemm = lambda n, k, lp=False: {**base, "quant": d.gemm_quant, "m": tokens, "n": n, "k": k,  # noqa: E731
                                   "low_precision_input": lp}
    mem = lambda dim_in, dim_out: {"bytes": elementwise_bytes(dim_in, dim_out, tokens)}  # noqa: E731
    ar = {**base, "tp": tp, "elements": tokens * h}
    ops = [("embedding", "mem", {"bytes": tokens * h * 2}, 1), ("embedding_ar", "allreduce", ar, 1)]
    ops += _kda_ops(m, d, plan, base, gemm, mem, ar, context, batch, seq)
    mh, mla = m["heads"] // tp, m["mla_layers"]
    ops += [("mla_norm", "mem", mem(2 * h, 2 * h), mla),
            ("mla_downscale_gemm", "gemm", gemm(m["q_lora"] + m["kv_lora"] + m["rope_dim"], h), mla)]
    ops += _mla_attention_ops(m, d, plan, base, gemm, context, batch, seq)
    ops += [("mla_gate_gemm", "gemm", gemm(mh * m["v_head_dim"], h), mla),
            ("mla_gate_mul", "mem", mem(2 * mh * m["v_head_dim"], mh * m["v_head_dim"]), mla),
            ("mla_ar", "allreduce", ar, mla)]
    if m["attn_res_block"] > 0:  # two aggregation points per layer, each a 4h -> 2h elementwise pass
        ops.append(("attn_res", "mem", mem(4 * h, 2 * h), 2 * L))
    ops.append(("ffn_norm", "mem", mem(2 * h, 2 * h), L))
    dense, inter = m["dense_layers"], m["inter"] // tp
    if dense:
        ops += [("dense_gate_up_gemm", "gemm", gemm(2 * inter, h), dense),
                ("dense_act_gate", "mem", mem(2 * inter, inter), dense),
                ("dense_down_gemm", "gemm", gemm(h, inter, True), dense), ("dense_ffn_ar", "allreduce", ar, dense)]
    n, lat, shared = m["moe_layers"], m["latent"], m["shared"] * m["moe_inter"] // tp
    moe = {**base, "quant": d.moe_quant, "distribution": m["distribution"], "gated": True, "topk": m["topk"],
           "experts": m["experts"], "hidden": lat, "inter": m["moe_inter"], "tp": d.moe_tp, "ep": d.moe_ep, "tokens": tokens}
    dispatch = {**base, "tp": d.moe_tp * d.moe_ep, "elements": tokens * lat}
    ops += [("router_gemm", "gemm", gemm(m["experts"], h), n), ("latent_down_gemm", "gemm", gemm(lat, h), n),
            ("latent_norm", "mem", mem(2 * lat, 2 * lat), n), ("moe_pre_dispatch", "allreduce", dispatch, n),
            ("moe", "moe", moe, n), ("moe_post_dispatch", "allreduce", dispatch, n),
            ("latent_up_gemm", "gemm", gemm(h, lat), n),
            ("shared_gate_up_gemm", "gemm", gemm(2 * shared, h), n),
            ("shared_act_gate", "mem", mem(2 * shared, shared), n), ("shared_down_gemm", "gemm", gemm(h, shared), n),
            ("logits_gemm", "gemm", {**gemm(m["vocab"] // tp, h), "m": batch}, 1)]
    return ops


def _kda_ops(m, d, plan, base, gemm, mem, ar, context, batch, seq):
    """KDA layers: projections, the plan's prefill conv + scan or its decode kernels, output norm / GEMM / allreduce.

    The gated output norm is a mem op in prefill and, where the plan says so (`decode_onorm`), in decode;
    vLLM's fused decode kernel includes it.
    """
    h, kda, hd = m["hidden"], m["kda_layers"], m["kda_head_dim"]
    kh = m["kda_heads"] // d.tp
    kd = kh * hd
    kernel = {**base, "heads": kh, "head_dim": hd, "d_model": h, "d_conv": m["d_conv"], "batch": batch}
    ops = [("kda_norm", "mem", mem(2 * h, 2 * h), kda), ("kda_qkvg_gemm", "gemm", gemm(4 * kd, h), kda),
           ("kda_bfa_gemm", "gemm", gemm(m["kda_heads"] + hd, h), kda), ("kda_fb_gemm", "gemm", gemm(kd, hd), kda)]
    if context:
        ops += [("kda_conv1d", "kda_kernel", {**kernel, "kernel": m["kda_conv"], "phase": "context", "seq": seq}, kda),
                ("kda_scan", "kda_kernel", {**kernel, "kernel": plan["kda_scan"], "phase": "context", "seq": seq}, kda)]
    else:
        ops += [(name, "kda_kernel", {**kernel, "kernel": k, "phase": "generation"}, kda)
                for name, k in plan["kda_decode"].items()]
    if context or plan["decode_onorm"]:
        ops.append(("kda_onorm", "mem", mem(2 * kd, kd), kda))
    return ops + [("kda_o_gemm", "gemm", gemm(h, kd, True), kda), ("kda_ar", "allreduce", ar, kda)]


def _mla_attention_ops(m, d, plan, base, gemm, context, batch, seq):
    """The MLA core after the down projection: `module` (vLLM's whole-block tables) or `split` (q_b / kv_b
    GEMMs, MLA attention, o GEMM; decode absorbs kv_b into BMMs around the latent attention)."""
    mh, mla, h = m["heads"] // d.tp, m["mla_layers"], m["hidden"]
    if plan["mla"] == "module":
        quants = {"kv_quant": d.kv_quant, "gemm_quant": d.gemm_quant, "heads": mh, "batch": batch,
                  "native_heads": m["heads"]}  # picks the model's rows of a multi-model module table
        block = ({**base, **quants, "fmha_quant": d.fmha_quant, "isl": seq} if context else {**base, **quants, "seq": seq})
        return [("mla_block", "mla_context_module" if context else "mla_generation_module", block, mla)]
    if plan["mla"] != "split":
        raise ValueError(f"models.yaml: Kimi-K3 backend {d.backend}: mla must be module or split, not {plan['mla']!r}")
    heads = m["heads"]
    q_b = ("mla_q_b_gemm", "gemm", gemm(heads * (m["nope_dim"] + m["rope_dim"]) // d.tp, m["q_lora"]), mla)
    o = ("mla_o_gemm", "gemm", gemm(h, heads * m["v_head_dim"] // d.tp, True), mla)
    if context:
        attn = {**base, "fmha_quant": d.fmha_quant, "kv_quant": d.kv_quant, "heads": mh, "isl": seq, "batch": batch}
        return [q_b, ("mla_kv_b_gemm", "gemm", gemm(heads * (m["nope_dim"] + m["v_head_dim"]) // d.tp, m["kv_lora"]), mla),
                ("attention", "context_mla", attn, mla), o]
    bmm = {**base, "quant": "bfloat16" if d.gemm_quant == "bfloat16" else "fp8", "heads": mh, "tokens": batch}
    attn = {**base, "kv_quant": d.kv_quant, "heads": mh, "batch": batch, "seq": seq}
    return [q_b, ("bmm_pre", "mla_bmm", {**bmm, "phase": "pre"}, mla), ("attention", "generation_mla", attn, mla),
            ("bmm_post", "mla_bmm", {**bmm, "phase": "post"}, mla), o]
