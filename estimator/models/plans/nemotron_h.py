"""NemotronH layer plan (`kind` nemotron_h: Nemotron-H, Nemotron-3 Nano / Super / Ultra, Nemotron-3.5): a hybrid stack
of Mamba-2, attention, routed-MoE and dense-MLP layers, each type's ops repeated by its layer count.

The op list reproduces what aiconfigurator-core 0.12.0 prices for `NemotronHForCausalLM` (its per-op breakdown):
the layer types come from the config's pattern (models.yaml `layer_pattern`: `hybrid_override_pattern`, else the
`layers_block_type` list); a Mamba layer is norm, in-projection GEMM, causal conv1d, SSM scan, out-projection GEMM
and a TP allreduce, its kernels looked up at the model's unsharded dims (ops/mamba2.py); attention layers are GQA
without q/k norm; MoE layers run a non-gated (ReLU²) shared expert beside a non-gated routed MoE, the experts and
their dispatch at the latent width where the config has `moe_latent_size` (a TP-split h → latent GEMM before the
dispatch, latent → h after the combine; under attention DP the experts over every rank's tokens); dense-MLP layers
are non-gated too. Every type ends in a TP allreduce;
no embedding allreduce; logits in bfloat16 at m = batch in both phases.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfledger.estimator.errors import EstimatorError
from perfledger.estimator.fit.roofline import elementwise_bytes
from perfledger.estimator.models.config import ModelConfig
from perfledger.estimator.models.plans.gqa import moe_dispatch
from perfledger.estimator.models.priced import PricedModel


@dataclass(frozen=True)
class NemotronHDims:
    """Layer counts per type and the Mamba-2 / MoE shapes beyond models.yaml's dims."""

    mamba_layers: int
    attention_layers: int
    moe_layers: int
    mlp_layers: int
    mamba_heads: int
    mamba_head_dim: int
    d_state: int
    d_conv: int
    n_groups: int
    chunk: int
    shared_inter: int  # moe_shared_expert_intermediate_size (0: none)
    latent: int  # moe_latent_size (0: the experts run at the hidden size)
    expert_width: int  # the routed experts' and their dispatch's width: latent, else the hidden size


def pattern(model: ModelConfig, family: dict) -> str:
    """The per-layer type string (models.yaml `layer_pattern`): the config's pattern string, else its block list
    mapped to the pattern's symbols; an unknown block type names the config and the known ones."""
    rule, t = family["layer_pattern"], model.text
    if isinstance(t.get(rule["key"]), str):
        return t[rule["key"]]
    blocks, symbols = t.get(rule["blocks"]), rule["block_symbols"]
    if not isinstance(blocks, list):
        raise EstimatorError(f"{model.path}: NemotronH config needs {rule['key']!r} or {rule['blocks']!r}")
    unknown = sorted({str(b) for b in blocks} - set(symbols))
    if unknown:
        raise EstimatorError(f"{model.path}: {rule['blocks']} holds unknown block types {unknown} (known: {', '.join(symbols)})")
    return "".join(symbols[str(b)] for b in blocks)


def dims(model: ModelConfig, family: dict) -> NemotronHDims:
    t, kinds = model.text, family["layer_pattern"]["types"]
    layout = pattern(model, family)
    counts = {kind: layout.count(symbol) for kind, symbol in kinds.items()}
    return NemotronHDims(counts["mamba"], counts["attention"], counts["moe"], counts["mlp"], int(t["mamba_num_heads"]),
                         int(t["mamba_head_dim"]), int(t["ssm_state_size"]), int(t["conv_kernel"]), int(t["n_groups"]),
                         int(t["chunk_size"]), int(t.get("moe_shared_expert_intermediate_size") or 0),
                         int(t.get("moe_latent_size") or 0), int(t.get("moe_latent_size") or t["hidden_size"]))


def ops(m: PricedModel, d, tokens: int, context: bool, batch: int, seq: int) -> list[tuple[str, str, dict, float]]:
    """(name, op, query, scale) for one forward pass at `tokens` tokens (scale = layer count of the type)."""
    dims, own, tp = m.dims, m.plan_dims, d.tp
    h = dims.hidden
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    gemm = lambda n, k, quant=None, lp=False: {**base, "quant": quant or d.gemm_quant, "m": tokens, "n": n, "k": k,  # noqa: E731
                                               "low_precision_input": lp}
    mem = lambda dim_in, dim_out: {"bytes": elementwise_bytes(dim_in, dim_out, tokens)}  # noqa: E731
    ar = {**base, "tp": tp, "elements": tokens * h}
    out = [("embedding", "mem", {"bytes": tokens * h * 2}, 1)]
    if own.mamba_layers:
        out += _mamba_ops(m, d, base, gemm, mem, ar, context, batch, seq)
    if n := own.attention_layers:
        heads, kv_heads = dims.heads // tp, -(-dims.kv_heads // tp)
        attn = {**base, "kv_quant": d.kv_quant, "head_dim": dims.head_dim, "window": 0, "kv_heads": kv_heads, "heads": heads,
                "batch": batch, "lane_defaults": True}
        attn = {**attn, "fmha_quant": d.fmha_quant, "isl": seq, "qk_norm": False} if context else {**attn, "seq": seq}
        out += [("attn_norm", "mem", mem(2 * h, 2 * h), n),
                ("qkv_gemm", "gemm", gemm((heads + 2 * kv_heads) * dims.head_dim, h), n),
                ("attention", "attention" if context else "generation_attention", attn, n),
                ("proj_gemm", "gemm", gemm(h, heads * dims.head_dim, lp=True), n), ("attn_ar", "allreduce", ar, n)]
    if n := own.moe_layers:
        out += _moe_ops(m, d, base, gemm, mem, ar, tokens, n)
    if n := own.mlp_layers:
        out += [("mlp_norm", "mem", mem(2 * h, 2 * h), n), *_relu2_mlp("mlp", gemm, mem, dims.inter // tp, h, n, lp=False),
                ("mlp_ar", "allreduce", ar, n)]
    out.append(("logits_gemm", "gemm", {**gemm(dims.vocab // tp, h, "bfloat16"), "m": batch}, 1))
    return out


def _mamba_ops(m, d, base, gemm, mem, ar, context, batch, seq):
    """Mamba-2 layers: the in-projection (x, z, B, C per TP shard, one dt per head), the prefill conv + chunked scan or
    the decode conv update + selective state update at the unsharded dims, the out-projection."""
    own, h, n = m.plan_dims, m.dims.hidden, m.plan_dims.mamba_layers
    heads = own.mamba_heads // d.tp
    inner, groups = heads * own.mamba_head_dim, max(own.n_groups // d.tp, 1)
    kernel = {**base, "phase": "context" if context else "generation", "d_model": h, "nheads": own.mamba_heads,
              "head_dim": own.mamba_head_dim, "d_state": own.d_state, "d_conv": own.d_conv, "n_groups": own.n_groups,
              "chunk_size": own.chunk, "batch": batch, "seq": seq if context else 1}
    conv, scan = m.family["mamba_kernels"]["context" if context else "generation"]
    return [("mamba_norm", "mem", mem(2 * h, 2 * h), n),
            ("mamba_in_proj_gemm", "gemm", gemm(2 * inner + 2 * groups * own.d_state + heads, h), n),
            ("mamba_conv1d", "mamba2_kernel", {**kernel, "kernel": conv}, n),
            ("mamba_ssm", "mamba2_kernel", {**kernel, "kernel": scan}, n),
            ("mamba_out_proj_gemm", "gemm", gemm(h, inner), n), ("mamba_ar", "allreduce", ar, n)]


def _moe_ops(m, d, base, gemm, mem, ar, tokens, n):
    """MoE layers: the ReLU² shared expert, the bf16 router, and the non-gated routed MoE with its dispatch /
    combine at the latent width (TP-split h → latent and latent → h GEMMs around them) or the hidden size."""
    dims, own, tp = m.dims, m.plan_dims, d.tp
    h, latent, width = dims.hidden, own.latent, own.expert_width
    moe = {**base, "quant": d.moe_quant, "distribution": m.family["distribution"], "gated": False, "topk": dims.topk,
           "experts": dims.experts, "hidden": width, "inter": dims.moe_inter, "tp": d.moe_tp, "ep": d.moe_ep,
           "tokens": tokens * d.attention_dp}
    out = [("moe_norm", "mem", mem(2 * h, 2 * h), n), *_relu2_mlp("shared", gemm, mem, own.shared_inter // tp, h, n, lp=True),
           ("router_gemm", "gemm", gemm(dims.experts, h, "bfloat16"), n)]
    if latent:
        out.append(("fc1_latent_proj_gemm", "gemm", gemm(latent // tp, h), n))
    out += [("moe_pre_dispatch", *moe_dispatch(d, tokens, width, "pre"), n), ("moe", "moe", moe, n),
            ("moe_post_dispatch", *moe_dispatch(d, tokens, width, "post"), n)]
    if latent:
        out.append(("fc2_latent_proj_gemm", "gemm", gemm(h, latent // tp, lp=True), n))
    return out + [("moe_ar", "allreduce", ar, n)]


def _relu2_mlp(prefix, gemm, mem, inter, h, count, *, lp):
    """Non-gated MLP: up GEMM, ReLU², down GEMM (`lp`: its input already quantized, as 0.12.0 prices the shared
    expert's but not the dense MLP's)."""
    return [(f"{prefix}_up_gemm", "gemm", gemm(inter, h), count), (f"{prefix}_relu2", "mem", mem(inter, inter), count),
            (f"{prefix}_down_gemm", "gemm", gemm(h, inter, lp=lp), count)]
