"""Kimi-K3 static layer plan: KDA and MLA attention layers, attention residuals, one dense and many latent-MoE FFNs.

The op list (names, shapes, repeat counts) reproduces what aiconfigurator-core 0.12.0 prices for
`KimiK3ForConditionalGeneration`, found by reading its per-op breakdown and the shapes in its compiled op
spec: 69 KDA + 24 MLA layers (config `linear_attn_config`), every layer two attention-residual mem ops,
`first_k_dense_replace` dense FFN layers and a latent MoE (hidden → routed_expert_hidden_size → hidden,
RMS-normed at the latent width) on the rest; under attention DP the experts run every rank's tokens and the
dispatch is the backend's collective at the latent width (gqa.moe_dispatch). The plan reads models.yaml's dims,
its own `K3Dims` and the `models.yaml` family (kernels, routing, and per backend the MLA form and KDA kernels:
`backends`); quants come from the deployment.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfledger.estimator.fit.roofline import elementwise_bytes
from perfledger.estimator.models.config import ModelConfig
from perfledger.estimator.models.plans.gqa import moe_dispatch
from perfledger.estimator.models.priced import PricedModel


@dataclass(frozen=True)
class K3Dims:
    """Kimi-K3's dims beyond models.yaml's: the hybrid layer split, KDA geometry, the latent MoE width."""

    kda_layers: int
    mla_layers: int
    kda_heads: int
    kda_head_dim: int
    d_conv: int  # KDA short-convolution kernel size
    dense_layers: int  # first_k_dense_replace
    moe_layers: int
    latent: int  # routed_expert_hidden_size
    attn_res_block: int  # attention-residual block size (0: none)


def dims(model: ModelConfig, family: dict) -> K3Dims:
    """Layer counts and widths from the HF config's text_config (the block the reference reads)."""
    t = model.text
    lin = t["linear_attn_config"]
    dense = int(t.get("first_k_dense_replace", 0))
    return K3Dims(kda_layers=len(lin["kda_layers"]), mla_layers=len(lin["full_attn_layers"]), kda_heads=lin["num_heads"],
                  kda_head_dim=lin["head_dim"], d_conv=lin["short_conv_kernel_size"], dense_layers=dense,
                  moe_layers=t["num_hidden_layers"] - dense, latent=t["routed_expert_hidden_size"],
                  attn_res_block=t["attn_res_block_size"])


def ops(m: PricedModel, d, tokens: int, context: bool, batch: int, seq: int) -> list[tuple[str, str, dict, float]]:
    """(name, op, query, scale) for one K3 forward pass at `tokens` tokens (scale = layer count)."""
    dims, k3, tp = m.dims, m.plan_dims, d.tp
    h, L = dims.hidden, dims.layers
    plan = m.family["backends"][d.backend]
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    gemm = lambda n, k, lp=False: {**base, "quant": d.gemm_quant, "m": tokens, "n": n, "k": k,  # noqa: E731
                                   "low_precision_input": lp}
    mem = lambda dim_in, dim_out: {"bytes": elementwise_bytes(dim_in, dim_out, tokens)}  # noqa: E731
    ar = {**base, "tp": tp, "elements": tokens * h}
    ops = [("embedding", "mem", {"bytes": tokens * h * 2}, 1), ("embedding_ar", "allreduce", ar, 1)]
    ops += _kda_ops(m, d, plan, base, gemm, mem, ar, context, batch, seq, tokens)
    mh, mla = dims.heads // tp, k3.mla_layers
    ops += [("mla_norm", "mem", mem(2 * h, 2 * h), mla),
            ("mla_downscale_gemm", "gemm", gemm(dims.q_lora + dims.kv_lora + dims.rope_dim, h), mla)]
    ops += _mla_attention_ops(m, d, plan, base, gemm, context, batch, seq, tokens)
    ops += [("mla_gate_gemm", "gemm", gemm(mh * dims.v_head_dim, h), mla),
            ("mla_gate_mul", "mem", mem(2 * mh * dims.v_head_dim, mh * dims.v_head_dim), mla),
            ("mla_ar", "allreduce", ar, mla)]
    if k3.attn_res_block > 0:  # two aggregation points per layer, each a 4h -> 2h elementwise pass
        ops.append(("attn_res", "mem", mem(4 * h, 2 * h), 2 * L))
    ops.append(("ffn_norm", "mem", mem(2 * h, 2 * h), L))
    dense, inter = k3.dense_layers, dims.inter // tp
    if dense:
        ops += [("dense_gate_up_gemm", "gemm", gemm(2 * inter, h), dense),
                ("dense_act_gate", "mem", mem(2 * inter, inter), dense),
                ("dense_down_gemm", "gemm", gemm(h, inter, True), dense), ("dense_ffn_ar", "allreduce", ar, dense)]
    n, lat, shared = k3.moe_layers, k3.latent, dims.shared * dims.moe_inter // tp
    moe = {**base, "quant": d.moe_quant, "distribution": m.family["distribution"], "gated": True, "topk": dims.topk,
           "experts": dims.experts, "hidden": lat, "inter": dims.moe_inter, "tp": d.moe_tp, "ep": d.moe_ep,
           "tokens": tokens * d.attention_dp}
    ops += [("router_gemm", "gemm", gemm(dims.experts, h), n), ("latent_down_gemm", "gemm", gemm(lat, h), n),
            ("latent_norm", "mem", mem(2 * lat, 2 * lat), n), ("moe_pre_dispatch", *moe_dispatch(d, tokens, lat, "pre"), n),
            ("moe", "moe", moe, n), ("moe_post_dispatch", *moe_dispatch(d, tokens, lat, "post"), n),
            ("latent_up_gemm", "gemm", gemm(h, lat), n),
            ("shared_gate_up_gemm", "gemm", gemm(2 * shared, h), n),
            ("shared_act_gate", "mem", mem(2 * shared, shared), n), ("shared_down_gemm", "gemm", gemm(h, shared), n),
            ("logits_gemm", "gemm", {**gemm(dims.vocab // tp, h), "m": batch}, 1)]
    return ops


def _kda_ops(m, d, plan, base, gemm, mem, ar, context, batch, seq, tokens):
    """KDA layers: projections, the plan's prefill conv + scan or its decode kernels, output norm / GEMM / allreduce.

    The gated output norm is a mem op in prefill and, where the plan says so (`decode_onorm`), in decode;
    vLLM's fused decode kernel includes it.
    """
    k3, h = m.plan_dims, m.dims.hidden
    kda, hd = k3.kda_layers, k3.kda_head_dim
    kh = k3.kda_heads // d.tp
    kd = kh * hd
    kernel = {**base, "heads": kh, "head_dim": hd, "d_model": h, "d_conv": k3.d_conv, "batch": batch}
    ops = [("kda_norm", "mem", mem(2 * h, 2 * h), kda), ("kda_qkvg_gemm", "gemm", gemm(4 * kd, h), kda),
           ("kda_bfa_gemm", "gemm", gemm(k3.kda_heads + hd, h), kda), ("kda_fb_gemm", "gemm", gemm(kd, hd), kda)]
    if context:  # the prefill kernels run over the pass's tokens per sequence (a mixed step's decode rows included)
        rows = tokens // batch
        ops += [("kda_conv1d", "kda_kernel", {**kernel, "kernel": m.family["kda_conv"], "phase": "context", "seq": rows}, kda),
                ("kda_scan", "kda_kernel", {**kernel, "kernel": plan["kda_scan"], "phase": "context", "seq": rows}, kda)]
    else:
        ops += [(name, "kda_kernel", {**kernel, "kernel": k, "phase": "generation"}, kda)
                for name, k in plan["kda_decode"].items()]
    if context or plan["decode_onorm"]:
        ops.append(("kda_onorm", "mem", mem(2 * kd, kd), kda))
    return ops + [("kda_o_gemm", "gemm", gemm(h, kd, True), kda), ("kda_ar", "allreduce", ar, kda)]


def _mla_attention_ops(m, d, plan, base, gemm, context, batch, seq, tokens):
    """The MLA core after the down projection: `module` (vLLM's whole-block tables, prefill at the pass's tokens per
    sequence) or `split` (q_b / kv_b GEMMs, MLA attention, o GEMM; decode absorbs kv_b into BMMs around the latent
    attention)."""
    dims, mla = m.dims, m.plan_dims.mla_layers
    heads, h = dims.heads, dims.hidden
    mh = heads // d.tp
    if plan["mla"] == "module":
        quants = {"kv_quant": d.kv_quant, "gemm_quant": d.gemm_quant, "heads": mh, "batch": batch,
                  "native_heads": heads}  # picks the model's rows of a multi-model module table
        block = ({**base, **quants, "fmha_quant": d.fmha_quant, "isl": tokens // batch} if context
                 else {**base, **quants, "seq": seq})
        return [("mla_block", "mla_context_module" if context else "mla_generation_module", block, mla)]
    if plan["mla"] != "split":
        raise ValueError(f"models.yaml: Kimi-K3 backend {d.backend}: mla must be module or split, not {plan['mla']!r}")
    q_b = ("mla_q_b_gemm", "gemm", gemm(heads * (dims.nope_dim + dims.rope_dim) // d.tp, dims.q_lora), mla)
    o = ("mla_o_gemm", "gemm", gemm(h, heads * dims.v_head_dim // d.tp, True), mla)
    if context:
        attn = {**base, "fmha_quant": d.fmha_quant, "kv_quant": d.kv_quant, "heads": mh, "isl": seq, "batch": batch}
        return [q_b, ("mla_kv_b_gemm", "gemm", gemm(heads * (dims.nope_dim + dims.v_head_dim) // d.tp, dims.kv_lora), mla),
                ("attention", "context_mla", attn, mla), o]
    bmm = {**base, "quant": "bfloat16" if d.gemm_quant == "bfloat16" else "fp8", "heads": mh, "tokens": batch}
    attn = {**base, "kv_quant": d.kv_quant, "heads": mh, "batch": batch, "seq": seq}
    return [q_b, ("bmm_pre", "mla_bmm", {**bmm, "phase": "pre"}, mla), ("attention", "generation_mla", attn, mla),
            ("bmm_post", "mla_bmm", {**bmm, "phase": "post"}, mla), o]
