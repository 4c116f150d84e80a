"""DeepSeek-V4 static layer plan (`DeepseekV4ForCausalLM`: V4-Pro / V4-Flash and their FP8 / NVFP4 checkpoints):
mHC around a compressed-attention module and a routed MoE with one shared expert, every layer.

The op list reproduces what aiconfigurator-core 0.12.0 prices for the architecture (its per-op breakdown and
compiled op spec, checked per op):
- per layer: mHC pre, the attention norm, the attention module, mHC post, the FFN norm, then the MoE half
  (shared_expert_moe.py `ffn_ops`: shared expert at moe_intermediate_size / tp in the deployment's GEMM quant,
  bf16 router, dispatch / combine, the routed MoE; decode overlaps the routed branch with the shared expert);
- attention: one module op per compress ratio of `compress_ratios`, scaled by its layer count — ratio 4 the
  CSA module, 128 the HCA module; the SWA layers (ratio 0) price as HCA (0.12.0 reuses the HCA tables), at the
  deployment's GEMM / KV quant and bf16 FMHA, heads / tp local of the native heads, o_groups / tp (at least 1);
- mHC in bf16 at the config's hc_mult and Sinkhorn iterations, at the pass's tokens;
- the MTP layers (num_nextn_predict_layers) are not priced at nextn 0; the routed MoE is the MoE op, or with
  `moe_backend=megamoe` (0.12.0's explicit SGLang MoE backend) one `dsv4_megamoe` op without dispatch / combine.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from perfledger.estimator.errors import UnsupportedModelError
from perfledger.estimator.fit.roofline import elementwise_bytes
from perfledger.estimator.models.config import ModelConfig
from perfledger.estimator.models.plans.shared_expert_moe import ffn_ops
from perfledger.estimator.models.priced import PricedModel


@dataclass(frozen=True)
class V4Dims:
    """DeepSeek-V4's dims beyond models.yaml's: attention geometry, layers per attention kind, mHC."""

    o_lora: int
    o_groups: int
    index_topk: int
    window: int
    kinds: tuple[tuple[str, int], ...]  # (attention kind, layer count), in the config's first-seen order
    ratios: tuple[int, ...]  # the decoder layers' compress ratios
    csa_layers: int  # layers by their own ratio (memory.yaml sizes KV and weights by them): 4
    hca_layers: int  # 128
    swa_layers: int  # 0 (window KV only; their module priced as HCA)
    hc_mult: int
    sinkhorn_iters: int


def dims(model: ModelConfig, family: dict) -> V4Dims:
    """From the config: the decoder layers' compress_ratios mapped to kinds by models.yaml `compress_kinds`
    (0 -> hca), mHC sizes; fewer ratios than layers is refused (as 0.12.0 refuses it)."""
    cfg, layers = model.config, int(model.config["num_hidden_layers"])
    ratios = tuple(int(r) for r in cfg.get("compress_ratios") or ())
    if len(ratios) < layers:
        raise UnsupportedModelError(f"{model.path}: compress_ratios has {len(ratios)} entries for {layers} layers")
    ratios = ratios[:layers]  # the entries past num_hidden_layers are the MTP layers', unpriced at nextn 0
    kinds_of = {int(r): k for r, k in family["compress_kinds"].items()}
    unknown = sorted(set(ratios) - set(kinds_of))
    if unknown or not ratios:
        raise UnsupportedModelError(f"{model.path}: compress_ratios {unknown or 'missing'} not priced "
                                    f"(models.yaml compress_kinds: {', '.join(map(str, kinds_of))})")
    counts = Counter(kinds_of[r] for r in ratios)
    return V4Dims(int(cfg["o_lora_rank"]), int(cfg["o_groups"]), int(cfg["index_topk"]), int(cfg["sliding_window"]),
                  tuple(counts.items()), ratios, ratios.count(4), ratios.count(128), ratios.count(0), int(cfg["hc_mult"]),
                  int(cfg["hc_sinkhorn_iters"]))


def ops(m: PricedModel, d, tokens: int, context: bool, batch: int, seq: int) -> list[tuple[str, str, dict, float]]:
    """(name, op, query, scale) for one DeepSeek-V4 forward pass at `tokens` tokens (scale = layer count)."""
    dims, own = m.dims, m.plan_dims
    h, L = dims.hidden, dims.layers
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    norm = {"bytes": elementwise_bytes(h, h, tokens)}
    mhc = {**base, "hc_mult": own.hc_mult, "hidden": h, "sinkhorn_iters": own.sinkhorn_iters, "tokens": tokens}
    attn = {**base, "fmha_quant": "bfloat16", "kv_quant": d.kv_quant, "gemm_quant": d.gemm_quant, "native_heads": dims.heads,
            "heads": dims.heads // d.tp, "hidden": h, "q_lora": dims.q_lora, "o_lora": own.o_lora, "head_dim": dims.head_dim,
            "rope_dim": dims.rope_dim, "index_heads": dims.index_heads, "index_head_dim": dims.index_head_dim,
            "index_topk": own.index_topk, "window": own.window, "o_groups": max(1, own.o_groups // d.tp), "batch": batch}
    op, shape = (("dsv4_context_module", {"isl": seq, "prefix": 0}) if context
                 else ("dsv4_generation_module", {"seq": seq}))
    attention = [("attention", op, {**attn, **shape, "kind": kind}, count) for kind, count in own.kinds]
    return [("embedding", "mem", {"bytes": tokens * h * 2}, 1),
            ("mhc_pre", "mhc_module", {**mhc, "phase": "pre"}, L),
            ("attn_norm", "mem", norm, L),
            *attention,
            ("mhc_post", "mhc_module", {**mhc, "phase": "post"}, L),
            ("ffn_norm", "mem", norm, L),
            *ffn_ops(m, d, tokens, context, dims.moe_inter // d.tp, d.gemm_quant),
            ("logits_gemm", "gemm", {**base, "quant": "bfloat16", "m": batch, "n": dims.vocab // d.tp, "k": h}, 1)]
