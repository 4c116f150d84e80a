"""Hybrid GQA layer plan (`kind` hybrid_moe: Llama-4, Step-3.7-Flash): banded / global attention × dense / MoE FFN.

The op list reproduces what aiconfigurator-core 0.12.0 prices for its hybrid MoE family (found from its per-op
breakdown, then checked per op): every layer is one of four types (global or banded attention, routed MoE or dense
SwiGLU FFN), each type's ops repeated by its layer count and named by the type; banded layers attend at the
config's window (Llama-4's chunked attention is priced as a window of `attention_chunk_size`); attention is one
`attention` entry over all types. No TP allreduce on the attention or dense paths and no embedding allreduce (as
0.12.0 prices this family); the MoE dispatch is the custom allreduce on the MoE group (under attention DP the backend's
collectives, gqa.moe_dispatch, with the experts over every rank's tokens); logits in bfloat16 in both
phases. Which layer is which comes from the config through the models.yaml family (`attention_layers`,
`moe_layers`); optional parts: a banded geometry of its own (`banded_geometry`: a config block holding the banded
heads / head dim; `geometry`: flat config keys per layer type, MiMo-V2-Flash's banded kv heads and head dims and each
type's value head dim), a head-wise attention gate (`head_gate`), q/k norm, and a shared expert (`shared_expert`)
priced as a dense FFN on every MoE layer. A geometry field the config leaves unset falls back to the model's own
(the value head dim of either type to the model's head_dim, as 0.12.0 does).
"""

from __future__ import annotations

from dataclasses import dataclass

from perfledger.estimator.errors import EstimatorError
from perfledger.estimator.fit.roofline import elementwise_bytes
from perfledger.estimator.models.config import ModelConfig
from perfledger.estimator.models.plans.gqa import moe_dispatch
from perfledger.estimator.models.priced import KVGather, PricedModel


@dataclass(frozen=True)
class HybridDims:
    """Per-layer types and the shapes beyond models.yaml's dims."""

    global_attention: tuple[bool, ...]  # per layer: global (True) or banded attention
    moe: tuple[bool, ...]  # per layer: routed MoE (True) or dense FFN
    window: int  # banded layers' window
    banded_heads: int  # banded layers' query heads (the model's where the config sets none)
    banded_head_dim: int  # banded layers' q/k head dim
    banded_kv_heads: int
    banded_v_head_dim: int
    global_v_head_dim: int
    dense_inter: int  # dense FFN width
    shared_inter: int  # shared-expert width on MoE layers (0: none)
    head_gate: bool


def _first(t: dict, keys: list, default=0):
    return next((t[k] for k in keys if t.get(k) is not None), default)


def dims(model: ModelConfig, family: dict) -> HybridDims:
    """Layer types from the config (text_config) by the family's rules: `attention_layers` is `alternate` (even
    layers banded, odd global) or `{layer_types: <full marker>}` (the config's list, trimmed to the decoder's layers);
    `{pattern: <key>}` (the config's per-layer 0/1 list, 1 global); `moe_layers` is `{every: <config key>}` (layer i
    is MoE when (i + 1) % step == 0), `{enum: <key>, first_dense: <key>}` (listed indices, else all but the first k)
    or `{pattern: <key>}` (a per-layer 0/1 list, 1 MoE; a single value repeats on every layer)."""
    t, where = model.text, f"{model.path}"
    layers = int(t["num_hidden_layers"])
    rule = family["attention_layers"]
    if rule == "alternate":
        global_attention = tuple(i % 2 == 1 for i in range(layers))
    elif "pattern" in rule:
        global_attention = _pattern(t, rule["pattern"], layers, where)
    else:
        kinds = list(t.get("layer_types") or [])[:layers]
        if len(kinds) != layers:
            raise EstimatorError(f"{where}: layer_types holds {len(kinds)} entries for {layers} layers")
        global_attention = tuple(k == rule["layer_types"] for k in kinds)
    rule = family["moe_layers"]
    if "pattern" in rule:
        moe = _pattern(t, rule["pattern"], layers, where)
    elif "every" in rule:
        step = int(t.get(rule["every"]) or 1)
        moe = tuple((i + 1) % step == 0 for i in range(layers))
    else:
        listed = t.get(rule["enum"])
        if isinstance(listed, str) and listed.strip():
            idx = {int(x) for x in listed.split(",") if x.strip()}
        elif isinstance(listed, (list, tuple)) and listed:
            idx = {int(x) for x in listed}
        else:
            idx = set(range(int(t.get(rule["first_dense"]) or 0), layers))
        moe = tuple(i in idx for i in range(layers))
    other = (t.get(family["banded_geometry"]) or {}) if family.get("banded_geometry") else {}
    heads = int(t["num_attention_heads"])
    head_dim = int(t.get("head_dim") or t["hidden_size"] // heads)
    kv_heads = int(t.get("num_key_value_heads") or heads)
    geo = {field: int(t.get(key) or 0) for field, key in (family.get("geometry") or {}).items()}
    return HybridDims(global_attention, moe, int(_first(t, family["window"])),
                      int(other.get("num_attention_heads") or heads), int(other.get("head_dim") or geo.get("banded_head_dim")
                                                                          or head_dim),
                      geo.get("banded_kv_heads") or kv_heads, geo.get("banded_v_head_dim") or head_dim,
                      geo.get("global_v_head_dim") or head_dim,
                      int(_first(t, family.get("dense_inter", [])) or t.get("intermediate_size") or 0),
                      int(_first(t, family.get("shared_expert", []))) if family.get("shared_expert") else 0,
                      bool(t.get(family["head_gate"], False)) if family.get("head_gate") else False)


def _pattern(t: dict, key: str, layers: int, where: str) -> tuple[bool, ...]:
    """A per-layer 0/1 config list as flags (one value: every layer); a wrong length or value names the key."""
    raw = t.get(key)
    values = list(raw) if isinstance(raw, (list, tuple)) else [raw] * layers
    if len(values) != layers or any(v not in (0, 1) for v in values):
        raise EstimatorError(f"{where}: {key} must hold {layers} entries of 0 / 1, got {raw!r}")
    return tuple(v == 1 for v in values)


# (prefix of the layer type's ops, global attention, MoE FFN), in the order 0.12.0 emits them
LAYER_TYPES = (("global", True, True), ("swa", False, True), ("swa_dense", False, False), ("global_dense", True, False))


def kv_gathers(m: PricedModel) -> list[KVGather]:
    """Context parallelism's KV all-gathers: one per attention type, each over its K and V head dims."""
    dims, own = m.dims, m.plan_dims
    global_layers = sum(own.global_attention)
    return [KVGather("_global", dims.kv_heads * (dims.head_dim + own.global_v_head_dim), global_layers),
            KVGather("_swa", own.banded_kv_heads * (own.banded_head_dim + own.banded_v_head_dim),
                     len(own.global_attention) - global_layers)]


def ops(m: PricedModel, d, tokens: int, context: bool, batch: int, seq: int) -> list[tuple[str, str, dict, float]]:
    """(name, op, query, scale) for one forward pass at `tokens` tokens (scale = layer count of the type)."""
    dims, own, family, tp = m.dims, m.plan_dims, m.family, d.tp
    h = dims.hidden
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    gemm = lambda n, k, quant=None, lp=False: {**base, "quant": quant or d.gemm_quant, "m": tokens, "n": n, "k": k,  # noqa: E731
                                               "low_precision_input": lp}
    mem = lambda dim_in, dim_out: {"bytes": elementwise_bytes(dim_in, dim_out, tokens)}  # noqa: E731
    attn_base = {**base, "kv_quant": d.kv_quant, "batch": batch, "lane_defaults": True}
    attn_base = ({**attn_base, "fmha_quant": d.fmha_quant, "isl": seq, "qk_norm": bool(family.get("qk_norm", False))}
                 if context else {**attn_base, "seq": seq})
    moe = {**base, "quant": d.moe_quant, "distribution": family["distribution"], "gated": True, "topk": dims.topk,
           "experts": dims.experts, "hidden": h, "inter": dims.moe_inter, "tp": d.moe_tp, "ep": d.moe_ep,
           "tokens": tokens * d.attention_dp}
    dense_inter = own.dense_inter // tp
    out = [("embedding", "mem", {"bytes": tokens * h * 2}, 1)]
    for prefix, is_global, is_moe in LAYER_TYPES:
        count = sum(g == is_global and e == is_moe for g, e in zip(own.global_attention, own.moe, strict=True))
        if not count:
            continue
        heads, head_dim, kv_heads, v_dim = ((dims.heads, dims.head_dim, dims.kv_heads, own.global_v_head_dim) if is_global
                                            else (own.banded_heads, own.banded_head_dim, own.banded_kv_heads,
                                                  own.banded_v_head_dim))
        kv_heads = -(-kv_heads // tp)
        q_heads, proj_in = heads // tp, heads * v_dim // tp
        attn = {**attn_base, "heads": q_heads, "kv_heads": kv_heads, "head_dim": head_dim,
                "window": 0 if is_global else own.window}
        out += [(f"{prefix}_attn_norm", "mem", mem(2 * h, 2 * h), count),
                (f"{prefix}_qkv_gemm", "gemm", gemm(heads * head_dim // tp + kv_heads * (head_dim + v_dim), h), count),
                ("attention", "attention" if context else "generation_attention", attn, count)]
        if own.head_gate:
            out += [(f"{prefix}_attn_gate_gemm", "gemm", gemm(q_heads, h), count),
                    (f"{prefix}_attn_gate", "mem", mem(proj_in + q_heads, proj_in), count)]
        out.append((f"{prefix}_proj_gemm", "gemm", gemm(h, proj_in, lp=True), count))
        ffn = "global" if is_global else "swa"
        if is_moe:
            out += [(f"{prefix}_moe_norm", "mem", mem(2 * h, 2 * h), count),
                    (f"{ffn}_router_gemm", "gemm", gemm(dims.experts, h, "bfloat16"), count),
                    (f"{ffn}_moe_pre_dispatch", *moe_dispatch(d, tokens, h, "pre"), count),
                    (f"{ffn}_moe", "moe", moe, count),
                    (f"{ffn}_moe_post_dispatch", *moe_dispatch(d, tokens, h, "post"), count)]
        else:
            out += [(f"{prefix}_ffn_norm", "mem", mem(2 * h, 2 * h), count),
                    *_dense_ffn(f"{ffn}_dense", gemm, mem, dense_inter, h, count)]
    out.append(("logits_gemm", "gemm", {**gemm(dims.vocab // tp, h, "bfloat16"), "m": batch}, 1))
    moe_layers = sum(own.moe)
    if own.shared_inter and moe_layers:
        out += _dense_ffn("shared_expert_dense", gemm, mem, own.shared_inter // tp, h, moe_layers)
    return out


def _dense_ffn(prefix, gemm, mem, inter, h, count):
    """Fused gate/up GEMM, SwiGLU, down GEMM (its input already quantized)."""
    return [(f"{prefix}_gate_up_gemm", "gemm", gemm(2 * inter, h), count),
            (f"{prefix}_act", "mem", mem(2 * inter, inter), count),
            (f"{prefix}_down_gemm", "gemm", gemm(h, inter, lp=True), count)]
