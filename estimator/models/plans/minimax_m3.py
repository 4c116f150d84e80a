"""MiniMax-M3 static layer plan: the MSA attention module + routed MoE with one shared expert, every layer.

The op list reproduces what aiconfigurator-core 0.12.0 prices for MiniMax-M3 (text decoder; its MINIMAXM3 family,
found from its model source and per-op breakdown, then checked per op): every one of num_hidden_layers is priced
as a MoE layer (the first_k_dense_replace dense layers are approximated as MoE + MSA); attention is the whole MSA
module (ops/dsa/msa.py) at max(1, heads / tp) query and max(1, kv heads / tp) kv heads over the MSA rows of the
family's `msa_architecture`, with the deployment's GEMM and KV quants; the shared expert is TP-sharded
(moe_intermediate_size / tp) at the deployment's GEMM quant; the rest is the shared-expert MoE layer
(models/plans/shared_expert_moe.py), decode overlapping the routed branch with the shared expert.
"""

from __future__ import annotations

from perfledger.estimator.models.plans.shared_expert_moe import layer_ops
from perfledger.estimator.models.priced import PricedModel


def ops(m: PricedModel, d, tokens: int, context: bool, batch: int, seq: int) -> list[tuple[str, str, dict, float]]:
    """(name, op, query, scale) for one MiniMax-M3 forward pass at `tokens` tokens (scale = layer count)."""
    dims = m.dims

    def attention(base: dict, _gemm) -> list[tuple[str, str, dict, float]]:
        attn = {**base, "architecture": m.family["msa_architecture"], "kv_quant": d.kv_quant, "gemm_quant": d.gemm_quant,
                "heads": max(1, dims.heads // d.tp), "kv_heads": max(1, dims.kv_heads // d.tp), "batch": batch}
        op, query = (("msa_context_module", {**attn, "isl": seq, "prefix": 0}) if context
                     else ("msa_generation_module", {**attn, "seq": seq}))
        return [("attention", op, query, dims.layers)]

    return layer_ops(m, d, tokens, context, batch, dims.moe_inter // d.tp, attention, shared_quant=d.gemm_quant)
