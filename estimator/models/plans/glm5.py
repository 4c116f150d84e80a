"""GLM-5 static layer plan: DSA attention module + routed MoE with one shared expert, every layer.

The op list (names, shapes, quants, repeat counts) reproduces what aiconfigurator-core 0.12.0 prices for
`GlmMoeDsaForCausalLM` (found from its per-op breakdown and compiled op spec, then checked per op):
- every one of num_hidden_layers is priced as a MoE layer (first_k_dense_replace is not a dense MLP here);
- attention is the whole DSA module at heads/tp, no attention allreduce; its GEMM quant is bfloat16 when
  the checkpoint keeps the attention projections unquantized (`attention_bf16`, quant/checkpoint.py), else
  the deployment's; GLM-5.2's skip-indexer layers are blended by the config's `indexer_types` full share
  on the backends whose collector records skip rows (`models.yaml` skip_indexer_backends);
- shared expert GEMMs (bfloat16 when the checkpoint excludes shared experts), router GEMM and logits in
  bfloat16, MoE dispatch as the custom allreduce on the MoE group;
- decode overlaps the routed branch (router, dispatch, MoE, combine) with the shared expert: max of the two.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfledger.estimator.models.config import ModelConfig
from perfledger.estimator.models.plans.shared_expert_moe import layer_ops
from perfledger.estimator.models.priced import PricedModel


@dataclass(frozen=True)
class GlmDims:
    """GLM-5's dims beyond models.yaml's: the share of layers that run the indexer."""

    full_frac: float


def dims(model: ModelConfig, family: dict) -> GlmDims:
    """The indexer full-layer share: `indexer_types` entries equal to the family's full marker (1.0 if absent)."""
    kinds = model.config.get("indexer_types") or []
    return GlmDims(kinds.count(family["full_indexer"]) / len(kinds) if kinds else 1.0)


def _module_quant(attention_bf16: dict[str, bool], gemm_quant: str) -> str:
    """The DSA module rows carry one GEMM quant: the common one, else the o projection's (the largest).
    `attention_bf16`: the checkpoint's unquantized attention projection groups."""
    modes = {g: "bfloat16" if bf16 else gemm_quant for g, bf16 in attention_bf16.items()}
    return next(iter(set(modes.values()))) if len(set(modes.values())) == 1 else modes["o"]


def ops(m: PricedModel, d, tokens: int, context: bool, batch: int, seq: int) -> list[tuple[str, str, dict, float]]:
    """(name, op, query, scale) for one GLM-5 forward pass at `tokens` tokens (scale = layer count)."""
    dims, own, family = m.dims, m.plan_dims, m.family
    frac = own.full_frac if d.backend in family.get("skip_indexer_backends", ()) else 1.0

    def attention(base: dict, _gemm) -> list[tuple[str, str, dict, float]]:
        attn = {**base, "architecture": family["dsa_architecture"], "kv_quant": d.kv_quant,
                "gemm_quant": _module_quant(m.unquantized.attention, d.gemm_quant), "heads": dims.heads // d.tp,
                "batch": batch, "full_frac": frac}
        op, query = (("dsa_context_module", {**attn, "isl": seq, "prefix": 0}) if context
                     else ("dsa_generation_module", {**attn, "seq": seq}))
        return [("attention", op, query, dims.layers)]

    return layer_ops(m, d, tokens, context, batch, dims.moe_inter // d.moe_tp, attention)
