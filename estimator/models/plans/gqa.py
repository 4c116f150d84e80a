"""GQA layer plan (`kind` dense and moe: Qwen3, Llama, MiMo, Qwen3-VL, Qwen3-MoE, Mixtral, MiniMax-M2, gpt-oss): the op
list of one transformer forward pass.

Dense layers: norm, qkv GEMM, attention, o-proj, norm, gate/up GEMM, act, down GEMM (+ TP allreduces); MoE layers
replace the MLP with router GEMM, dispatch, MoE block, combine. Router and logits GEMMs stay bf16 in a quantized
checkpoint; the o / down projections read an already quantized input (`low_precision_input`), as 0.12.0 prices them.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from perfledger.estimator.errors import UnsupportedModelError
from perfledger.estimator.fit.roofline import elementwise_bytes
from perfledger.estimator.models.config import ModelConfig
from perfledger.estimator.models.priced import PricedModel
from perfledger.estimator.quant.profiles import quant_profile
from perfledger.safe_io import data_yaml


def ops(m: PricedModel, d, tokens: int, context: bool, batch: int, seq: int, *, moe: bool) -> list[tuple[str, str, dict, float]]:
    """(name, op, query, scale) for one forward pass at `tokens` tokens (quants already resolved); `moe`: the
    MLP is a routed MoE block (plan `moe`), else a dense gated MLP (plan `dense`)."""
    dims, tp = m.dims, d.tp
    L, h = dims.layers, dims.hidden
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    # Router and logits GEMMs stay bf16 in a quantized checkpoint; the o / down projections read an already
    # quantized input (fp8_static: no scale_matrix pass), as 0.12.0 prices them.
    gemm = lambda mm, n, k, quant=None, lp=False: {**base, "quant": quant or d.gemm_quant, "m": mm, "n": n, "k": k,  # noqa: E731
                                                   "low_precision_input": lp}
    heads, kv_heads = dims.heads // tp, max(dims.kv_heads // tp, 1)
    ops = [("embedding", "mem", {"bytes": tokens * h * 2}, 1),
           ("add_norm_1", "mem", {"bytes": elementwise_bytes(2 * h, 2 * h, tokens)}, L),
           ("qkv_gemm", "gemm", gemm(tokens, (heads + 2 * kv_heads) * dims.head_dim, h), L)]
    attn = {**base, "kv_quant": d.kv_quant, "head_dim": dims.head_dim, "window": 0, "kv_heads": kv_heads, "heads": heads,
            "batch": batch, "lane_defaults": True}
    if context:
        attn = {**attn, "fmha_quant": d.fmha_quant, "isl": seq, "qk_norm": bool(m.family.get("qk_norm", False))}
    else:
        attn = {**attn, "seq": seq}
    op = "attention" if context else "generation_attention"
    # models.yaml `window_attention`: a share of the layers attends in a band (gpt-oss: half at window 128); both
    # parts are the one `attention` entry, as 0.12.0 reports them
    banded = m.family.get("window_attention")
    share = banded["layer_share"] if banded else 0.0
    if share:
        ops.append(("attention", op, {**attn, "window": banded["window"]}, L * share))
    ops.append(("attention", op, attn, L * (1 - share)))
    ops += [("proj_gemm", "gemm", gemm(tokens, h, heads * dims.head_dim, lp=True), L),
            ("add_norm_2", "mem", {"bytes": elementwise_bytes(2 * h, 2 * h, tokens)}, L)]
    ar = {**base, "tp": tp, "elements": tokens * h}
    if not moe:
        inter = dims.inter // tp
        ops += [("gate_ffn1_gemm", "gemm", gemm(tokens, 2 * inter, h), L),
                ("act_gate", "mem", {"bytes": elementwise_bytes(2 * inter, inter, tokens)}, L),
                ("ffn2_gemm", "gemm", gemm(tokens, h, inter, lp=True), L),
                ("ar_1", "allreduce", ar, L), ("ar_2", "allreduce", ar, L)]
    else:
        dp = d.attention_dp
        moe = {**base, "quant": d.moe_quant, "distribution": m.family["distribution"], "gated": True, "topk": dims.topk,
               "experts": dims.experts, "hidden": h, "inter": dims.moe_inter, "tp": d.moe_tp, "ep": d.moe_ep,
               "tokens": tokens * dp}
        ops += [("router_gemm", "gemm", gemm(tokens, dims.experts, h, "bfloat16"), L),
                ("moe_pre_dispatch", *moe_dispatch(d, tokens, h, "pre"), L), ("moe", "moe", moe, L),
                ("moe_post_dispatch", *moe_dispatch(d, tokens, h, "post"), L)]
    ops.append(("embedding_ar", "allreduce", ar, 1))
    if not context or not moe:
        ops.append(("logits_gemm", "gemm", gemm(batch, dims.vocab // tp, h, "bfloat16"), 1))
    return ops


MOE_DISPATCH_YAML = Path(__file__).with_name("moe_dispatch.yaml")


@cache
def _dispatch_rules() -> dict:
    return data_yaml(MOE_DISPATCH_YAML)


def moe_dispatch(d, tokens: int, h: int, side: str, *, attention_tp: bool = True) -> tuple[str, dict]:
    """(op, query) of one MoE dispatch of `tokens` × `h` per rank: the width's custom allreduce, or under attention DP
    the backend's collective (+ its attention-TP collective unless `attention_tp` is off) as one serial group
    (moe_dispatch.yaml; also the MLA line's and Qwen3.5's plans). A backend without an attention-TP rule keeps the
    width's allreduce beside attention TP (0.12.0's Qwen3.5 on TRT-LLM; the GQA plans refuse that deployment)."""
    width = d.moe_tp * d.moe_ep
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    rule = _dispatch_rules()[d.backend] if d.attention_dp > 1 else None
    if rule is None or (d.tp > 1 and rule["attention_tp"] is None):
        return "allreduce", {**base, "tp": width, "elements": tokens * h}

    def collective(op: str, gpus: int, elements: int) -> tuple:
        if op == "custom_allreduce":
            return ("allreduce", "allreduce", {**base, "tp": gpus, "elements": elements}, 1)
        return (op, "comm", {**base, "op": op, "quant": rule["quant"], "num_gpus": gpus, "elements": elements}, 1)

    group = [collective(rule[side], width, _gathered_elements(rule, d, side, tokens * d.attention_dp * h))]
    if d.tp > 1 and attention_tp:
        tp_rule = rule["attention_tp"]
        group.append(collective(tp_rule[side], width if tp_rule["over"] == "width" else d.tp, tokens * h))
    return "overlap", {"groups": [group]}


def _gathered_elements(rule: dict, d, side: str, elements: int) -> float:
    """The half elements one attention-DP collective carries: `elements`, or for a `pre` gather of an MoE quant the
    backend gathers quantized on this GPU generation (moe_dispatch.yaml `quantized_pre`) their bytes at the quant's
    `memory` per element, as half elements."""
    quantized = rule.get("quantized_pre")
    if side != "pre" or quantized is None or d.sm_version not in quantized["sm_versions"] \
            or d.moe_quant not in quantized["quants"]:
        return elements
    return elements * quant_profile("moe", d.moe_quant).memory / 2


def check(m: PricedModel, d, model: ModelConfig) -> None:
    """A block-quantized MoE whose per-GPU intermediate size splits a weight block is no valid deployment
    (models.yaml `moe_block_alignment`; 0.12.0 rejects it too), so it is refused instead of priced."""
    if d.attention_dp > 1:
        rules = _dispatch_rules()
        if d.backend not in rules:
            raise UnsupportedModelError(f"{model.path}: attention-dp {d.attention_dp} on {d.backend}: no MoE dispatch rule "
                                        f"for attention data parallelism ({MOE_DISPATCH_YAML.name} lists {', '.join(rules)})")
        if d.tp > 1 and rules[d.backend]["attention_tp"] is None:
            raise UnsupportedModelError(f"{model.path}: {d.backend} has no attention TP ({d.tp}) beside attention DP "
                                        f"({d.attention_dp}) ({MOE_DISPATCH_YAML.name})")
    rule = m.family.get("moe_block_alignment")
    if not rule or d.moe_quant != rule["quant"]:
        return
    config = model.path
    qcfg = model.config.get("quantization_config") or {}
    block = int((qcfg.get("weight_block_size") or [rule["default_block"]])[0])
    per_gpu = m.dims.moe_inter // d.moe_tp
    if per_gpu % block:
        raise UnsupportedModelError(f"{config}: moe_intermediate_size {m.dims.moe_inter} / moe_tp {d.moe_tp} = "
                                    f"{per_gpu} is not a multiple of the {d.moe_quant} weight block "
                                    f"{block} (quantization_config.weight_block_size); use a smaller moe_tp or moe_ep")
