"""DeepSeek-V3 static layer plan (`DeepseekV3ForCausalLM`: DeepSeek-V3 / R1 / Kimi-K2, and Kimi-K2.5's text model):
MLA attention + routed MoE with one shared expert, every layer.

The op list (names, shapes, quants, repeat counts) reproduces what aiconfigurator-core 0.12.0 prices for these
models outside its large-EP path (found from its per-op breakdown and compiled op spec, then checked per op):
- every one of num_hidden_layers is priced as a MoE layer (first_k_dense_replace is not a dense MLP here);
- attention is the MLA block: where every attention projection shares one GEMM quant, the whole MLA module op
  (asked in SILICON first, also under HYBRID) with the granular ops as its fallback on a data miss; a checkpoint
  mixing projection quants (DeepSeek-V3.1-NVFP4: bf16 q / kv, nvfp4 o) prices the granular ops directly:
  fused q_a + kv_a down projection, q_b and kv_b GEMMs, the attention kernel, o projection. The kernel is the
  backend's (`models.yaml` `attention`): `mla` = context MLA / BMM pre + generation MLA + BMM post at the MLA
  kernel tables' head convention (`mla_kernel_heads` / tp), `gqa` = vLLM's standard attention at v_head_dim;
- shared expert GEMMs split by tp (bf16 when the checkpoint excludes shared experts), router and logits bf16,
  MoE dispatch as the custom allreduce on the MoE group; `tp_allreduce_backends` pay two TP allreduces a layer;
- decode overlaps the routed branch (router, dispatch, MoE, combine) with the shared expert: max of the two;
- a pure-EP layout the planner prices through SGLang's DeepEP (plan/large_ep.py) has its own layer: `_deepep_ops`.
"""

from __future__ import annotations

from perfledger.estimator.errors import UnsupportedModelError
from perfledger.estimator.fit.roofline import elementwise_bytes
from perfledger.estimator.models.plans.shared_expert_moe import a2a_path, ffn_ops, layer_ops, shared_expert_quant
from perfledger.estimator.models.priced import KVGather, PricedModel


def _quants(m: PricedModel, gemm_quant: str) -> dict[str, str]:
    """GEMM quant per attention projection group (bf16 where the checkpoint excludes it), the fused down
    projection's (bf16 only when q and kv both are), the MLA BMMs' (the kv projection's, fp8 for a quantized one)."""
    group = {g: "bfloat16" if m.unquantized.attention.get(g) else gemm_quant for g in ("q", "kv", "o")}
    group["down"] = "bfloat16" if m.unquantized.flags()["down_bf16"] else gemm_quant
    group["bmm"] = "bfloat16" if "bfloat16" in (group["kv"], gemm_quant) else "fp8"
    return group


def _granular(m: PricedModel, d, q, base, gemm, context, batch, seq) -> list[tuple[str, str, dict, float]]:
    """The MLA block as separate ops: down projection, q_b / kv_b GEMMs, the backend's attention kernel, o GEMM."""
    dims, family, tp, L = m.dims, m.family, d.tp, m.dims.layers
    heads = dims.heads // tp
    form = family["attention"].get(d.backend)
    if form is None:
        raise UnsupportedModelError(f"{m.name}: models.yaml {family['kind']} `attention` names no MLA kernel for backend "
                                    f"{d.backend} (have {', '.join(family['attention'])})")
    ops = [("downscale_gemm", "gemm", gemm(dims.q_lora + dims.kv_lora + dims.rope_dim, dims.hidden, q["down"]), L),
           ("q_b_proj_gemm", "gemm", gemm(heads * (dims.nope_dim + dims.rope_dim), dims.q_lora, q["q"]), L)]
    if context:
        ops.append(("kv_b_proj_gemm", "gemm", gemm(heads * (dims.nope_dim + dims.v_head_dim), dims.kv_lora, q["kv"]), L))
    if form == "gqa":  # vLLM absorbs kv_b and runs its standard attention at v_head_dim
        attn = {**base, "kv_quant": d.kv_quant, "head_dim": dims.v_head_dim, "window": 0, "heads": heads,
                "kv_heads": max(dims.kv_heads // tp, 1), "batch": batch, "lane_defaults": True}
        ops.append(("attention", "attention", {**attn, "fmha_quant": d.fmha_quant, "isl": seq, "qk_norm": False}, L)
                   if context else ("attention", "generation_attention", {**attn, "seq": seq}, L))
    elif form == "mla":
        kernel_heads = family["mla_kernel_heads"] // tp
        if context:
            ops.append(("attention", "context_mla", {**base, "fmha_quant": d.fmha_quant, "kv_quant": d.kv_quant,
                                                     "heads": kernel_heads, "isl": seq, "batch": batch}, L))
        else:
            bmm = {**base, "quant": q["bmm"], "heads": heads, "tokens": batch}
            ops += [("bmm_pre", "mla_bmm", {**bmm, "phase": "pre"}, L),
                    ("attention", "generation_mla", {**base, "kv_quant": d.kv_quant, "heads": kernel_heads, "batch": batch,
                                                     "seq": seq}, L),
                    ("bmm_post", "mla_bmm", {**bmm, "phase": "post"}, L)]
    else:
        raise ValueError(f"models.yaml {family['kind']} backend {d.backend}: attention must be gqa or mla, not {form!r}")
    return ops + [("proj_gemm", "gemm", gemm(dims.hidden, heads * dims.v_head_dim, q["o"]), L)]


def _mla_block(m: PricedModel, d, base, gemm, context, batch, seq, tokens) -> list[tuple[str, str, dict, float]]:
    """The module op with the granular fallback where the projections share one quant, else the granular ops; the
    block's prefill, module or granular, runs at the pass's tokens per sequence (a mixed step's decode rows included,
    as 0.12.0 asks it: DeepSeek-V3 h200 sglang has no module rows at bfloat16 FMHA, so its mixed steps price the
    granular context MLA at the step's token count)."""
    q = _quants(m, d.gemm_quant)
    granular = _granular(m, d, q, base, gemm, context, batch, tokens // batch if context else seq)
    if len({q["q"], q["kv"], q["o"]}) > 1:  # no module row is keyed by a mixed checkpoint
        return granular
    dims = m.dims
    module = {**base, "kv_quant": d.kv_quant, "gemm_quant": q["o"], "heads": dims.heads // d.tp, "batch": batch,
              "native_heads": dims.heads}
    primary = (("mla_context_module", {**module, "fmha_quant": d.fmha_quant, "isl": tokens // batch}) if context
               else ("mla_generation_module", {**module, "seq": seq}))
    return [("mla_block", "fallback", {"primary": [("mla_module", *primary, dims.layers)], "fallback": granular}, 1)]


def _deepep_ops(m: PricedModel, d, tokens: int, context: bool, batch: int, seq: int, framework: dict
                ) -> list[tuple[str, str, dict, float]]:
    """SGLang's DeepEP layer (0.12.0's large-EP graph there, models.yaml `attention: deepep`): the qkv_a projection
    (context: the rank's tokens / tp) and the downscale GEMM of the same shape, the wide-EP MLA module (ops/wideep.py;
    q_b / kv_b / o inside it) between the attention TP all-gather and reduce-scatter (context, tp > 1), then the
    large-EP MoE half; every op serial, no second add-norm, no logits GEMM."""
    dims, tp, L, h = m.dims, d.tp, m.dims.layers, m.dims.hidden
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    quant = _quants(m, d.gemm_quant)["down"]
    down = lambda t: {**base, "quant": quant, "m": t, "n": dims.q_lora + dims.kv_lora + dims.rope_dim, "k": h}  # noqa: E731
    collective = lambda op: {**base, "op": op, "quant": "half", "num_gpus": tp, "elements": tokens * h}  # noqa: E731
    around = context and tp > 1
    mla = {**base, "kv_quant": d.kv_quant, "heads": m.family["mla_kernel_heads"] // tp, "batch": batch,
           "kernel": framework["mla_kernel"]}
    attention = (("attention", "wideep_context_mla", {**mla, "fmha_quant": d.fmha_quant, "isl": tokens // batch}, L)
                 if context else ("attention", "wideep_generation_mla", {**mla, "seq": seq}, L))
    return [("qkv_a_proj_gemm", "gemm", down(tokens // tp if context else tokens), L),
            *([("tp_all_gather", "comm", collective("all_gather"), L)] if around else []),
            ("embedding", "mem", {"bytes": tokens * h * 2}, 1),
            ("add_norm_1", "mem", {"bytes": elementwise_bytes(2 * h, 2 * h, tokens)}, L),
            ("downscale_gemm", "gemm", down(tokens), L),
            attention,
            *([("tp_reduce_scatter", "comm", collective("reduce_scatter"), L)] if around else []),
            *ffn_ops(m, d, tokens, context, dims.shared * dims.moe_inter // tp, shared_expert_quant(m, d))]


def kv_gathers(m: PricedModel) -> list[KVGather]:
    """Context parallelism's KV all-gather: one over every layer of the MLA latent (compressed KV + rope key, one
    cache entry a token and layer, no separate V)."""
    return [KVGather("", m.dims.kv_lora + m.dims.rope_dim, m.dims.layers)]


def ops(m: PricedModel, d, tokens: int, context: bool, batch: int, seq: int) -> list[tuple[str, str, dict, float]]:
    """(name, op, query, scale) for one DeepSeek-V3 forward pass at `tokens` tokens (scale = layer count)."""
    dims, tp = m.dims, d.tp
    path = a2a_path(m, d, context)
    if path is not None and path[1].get("attention") == "deepep":
        return _deepep_ops(m, d, tokens, context, batch, seq, path[1])
    ops = layer_ops(m, d, tokens, context, batch, dims.shared * dims.moe_inter // tp,
                    lambda base, gemm: _mla_block(m, d, base, gemm, context, batch, seq, tokens))
    if d.backend in m.family.get("tp_allreduce_backends", ()):
        ops.append(("tp_allreduce", "allreduce", {"system": d.system, "backend": d.backend, "version": d.version,
                                                  "tp": tp, "elements": tokens * dims.hidden}, 2 * dims.layers))
    return ops
