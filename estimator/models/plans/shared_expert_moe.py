"""The layer both the DeepSeek-V3 and the GLM-5 plans price: an attention block + a routed MoE with one shared
expert, every layer, as aiconfigurator-core 0.12.0 prices it.

- embedding, the two add-norms and the logits GEMM (bf16, at m = batch) around `attention`, the plan's own ops;
- `ffn_ops`, the MoE half alone (DeepSeek-V4's plan wraps it in its own mHC / norm ops), which is:
- the shared expert's GEMMs at `shared_inter` per GPU (bf16 where the checkpoint excludes shared experts), the
  router GEMM in bf16, the MoE dispatch / combine as the custom allreduce over the MoE group (under attention DP:
  the experts run every rank's tokens, the dispatch is the backend's collective, gqa.moe_dispatch);
- decode overlaps the routed branch (router, dispatch, MoE, combine) with the shared expert: the slower one counts;
- a layout the planner prices through the MoE all-to-all (`Deploy.moe_a2a`, plan/large_ep.py): router (not on
  SGLang), the shared expert unsplit (context tokens / tp), dispatch, the routed MoE at moe_tp 1 over every rank's
  tokens (SGLang: its wide-EP tables), combine, serial in both phases (0.12.0's large-EP graph);
- a deployment `moe_backend` (models.yaml `moe_backends`: DeepSeek-V4's megamoe) fuses dispatch, MoE and combine
  into the backend's one op at the rank's own tokens.
"""

from __future__ import annotations

from collections.abc import Callable

from perfledger.estimator.fit.roofline import elementwise_bytes
from perfledger.estimator.models.plans.gqa import moe_dispatch
from perfledger.estimator.models.priced import PricedModel
from perfledger.estimator.ops.moe_a2a import rules as a2a_rules

Op = tuple[str, str, dict, float]


def a2a_path(m: PricedModel, d, context: bool) -> tuple[str, dict] | None:
    """(comm backend, its framework entry of models.yaml `moe_a2a_backends`) where the planner switched this pass
    to the MoE all-to-all (`Deploy.moe_a2a`, plan/large_ep.py), else None."""
    comm = dict(d.moe_a2a).get("context" if context else "generation")
    return None if comm is None else (comm, m.family["moe_a2a_backends"][d.backend])


def shared_expert_quant(m: PricedModel, d, fixed: str | None = None) -> str:
    """The shared expert's GEMM quant: the plan's `fixed` one, else bf16 where the checkpoint excludes shared experts,
    else the deployment's GEMM quant."""
    return fixed or ("bfloat16" if m.unquantized.shared else d.gemm_quant)


def ffn_ops(m: PricedModel, d, tokens: int, context: bool, shared_inter: int, shared_q: str) -> list[Op]:
    """The MoE half of a layer: the shared expert (`shared_inter` per GPU at `shared_q`), the bf16 router, the
    dispatch / combine allreduce around the routed MoE; decode overlaps the routed branch with the shared expert."""
    dims, family = m.dims, m.family
    h, L = dims.hidden, dims.layers
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    gemm = lambda n, k, quant: {**base, "quant": quant, "m": tokens, "n": n, "k": k}  # noqa: E731
    shared = [("shared_gate_up_gemm", "gemm", gemm(2 * shared_inter, h, shared_q), L),
              ("shared_act_gate", "mem", {"bytes": elementwise_bytes(2 * shared_inter, shared_inter, tokens)}, L),
              ("shared_ffn2_gemm", "gemm", gemm(h, shared_inter, shared_q), L)]
    moe = {**base, "quant": d.moe_quant, "distribution": family["distribution"], "gated": True, "topk": dims.topk,
           "experts": dims.experts, "hidden": h, "inter": dims.moe_inter, "tp": d.moe_tp, "ep": d.moe_ep,
           "tokens": tokens * d.attention_dp}
    router = ("router_gemm", "gemm", gemm(dims.experts, h, "bfloat16"), L)
    path = a2a_path(m, d, context)
    if path is not None:
        comm, framework = path
        return [*([router] if framework.get("router", True) else []), *_a2a_shared(m, d, tokens, context, shared_q, base),
                *_a2a_routed(m, d, tokens, context, comm, moe, base, framework)]
    backend = d.moe_backend
    if backend is not None:  # one fused module (static.check_moe_backend admitted it), at the rank's own tokens
        fused = {**moe, "phase": "context" if context else "generation", "tokens": tokens}
        del fused["gated"]
        routed = [router, (backend, family["moe_backends"][backend]["op"], fused, L)]
    else:
        routed = [router, ("moe_pre_dispatch", *moe_dispatch(d, tokens, h, "pre"), L), ("moe", "moe", moe, L),
                  ("moe_post_dispatch", *moe_dispatch(d, tokens, h, "post"), L)]
    return shared + routed if context else [("moe_overlap", "overlap", {"groups": [routed, shared]}, 1)]


def _a2a_shared(m: PricedModel, d, tokens: int, context: bool, shared_q: str, base: dict) -> list[Op]:
    """The whole shared expert on every rank; a context pass's tokens are split over the attention TP ranks."""
    dims = m.dims
    h, L, inter = dims.hidden, dims.layers, dims.shared * dims.moe_inter
    t = tokens // d.tp if context else tokens
    gemm = lambda n, k: {**base, "quant": shared_q, "m": t, "n": n, "k": k}  # noqa: E731
    return [("gate_ffn1_gemm", "gemm", gemm(2 * inter, h), L),
            ("act_gate", "mem", {"bytes": elementwise_bytes(2 * inter, inter, t)}, L),
            ("ffn2_gemm", "gemm", gemm(h, inter), L)]


def _a2a_routed(m: PricedModel, d, tokens: int, context: bool, comm: str, moe: dict, base: dict,
                framework: dict) -> list[Op]:
    """Dispatch, the routed MoE, combine over the comm backend's rows (ops/moe_a2a.py; DeepEP context messages
    are per attention-TP rank); the experts priced by the framework's expert-compute op (models.yaml
    `moe_a2a_backends`: the fused MoE's rows, or SGLang's wide-EP tables per phase)."""
    dims, L = m.dims, m.dims.layers
    spec = a2a_rules()["planner_backends"][comm]
    a2a = {**base, "comm_backend": comm, "comm_dtype": spec["comm_dtype"], "ep": d.moe_ep, "hidden": dims.hidden,
           "topk": dims.topk, "experts": dims.experts, "sms": spec["sms"], "tokens": tokens,
           "attention_tp": d.tp if context and comm.startswith("deepep") else 1,
           "nodes": d.a2a_nodes}
    expert = framework["experts"]
    if expert != "moe":
        moe = {**moe, "phase": "context" if context else "generation"}
    return [("moe_dispatch", "moe_a2a", {**a2a, "phase": "dispatch"}, L), ("moe", expert, moe, L),
            ("moe_combine", "moe_a2a", {**a2a, "phase": "combine"}, L)]


def layer_ops(m: PricedModel, d, tokens: int, context: bool, batch: int, shared_inter: int,
              attention: Callable[[dict, Callable[[int, int, str], dict]], list[Op]], shared_quant: str | None = None
              ) -> list[Op]:
    """(name, op, query, scale) of one forward pass at `tokens` tokens; `attention(base, gemm)` gives the plan's
    attention ops (base: the slice keys; gemm(n, k, quant): a GEMM query at `tokens`); `shared_quant`: the shared
    expert's GEMM quant where the plan fixes it (`shared_expert_quant`)."""
    dims = m.dims
    h, L = dims.hidden, dims.layers
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    gemm = lambda n, k, quant: {**base, "quant": quant, "m": tokens, "n": n, "k": k}  # noqa: E731
    mem = lambda dim_in, dim_out: {"bytes": elementwise_bytes(dim_in, dim_out, tokens)}  # noqa: E731
    shared_q = shared_expert_quant(m, d, shared_quant)
    ops = [("embedding", "mem", {"bytes": tokens * h * 2}, 1),
           ("add_norm_1", "mem", mem(2 * h, 2 * h), L),
           *attention(base, gemm),
           ("add_norm_2", "mem", mem(2 * h, 2 * h), L),
           *ffn_ops(m, d, tokens, context, shared_inter, shared_q)]
    ops.append(("logits_gemm", "gemm", {**gemm(dims.vocab // d.tp, h, "bfloat16"), "m": batch}, 1))
    return ops
