"""In-flight-batching steps against 0.12.0's engine: every op of a mixed step (its three passes) and of a decode-only
step, over dense / MoE, pipeline, MTP, chunked context and cached prefix, priced in one batch (price_many); and the
MLA / DSA / KDA plans (Kimi-K3, GLM-5, DeepSeek-V3), whose attention passes follow the op names."""

from __future__ import annotations

from dataclasses import replace

import pytest

from perfledger.estimator.models.config import resolve_model
from perfledger.estimator.models.plans.registry import load_model
from perfledger.estimator.plan.evaluate import price_many
from perfledger.estimator.plan.steps import SCALED_CONTEXT, decode_step, mixed_step
from perfledger.estimator.quant.checkpoint import resolve as resolve_quants
from perfledger.estimator.static import Deploy

pytestmark = pytest.mark.aic
SHAPES = [(4000, 63, 4000, 500), (8000, 30, 4000, 500), (2000, 30, 4000, 500), (3000, 5, 1000, 200), (1000, 1, 1000, 2)]
CASES = [("Qwen/Qwen3-32B", dict(tp=4), dict(tp_size=4), SHAPES, 0),
         ("Qwen/Qwen3-32B", dict(tp=2, pp=2, nextn=1), dict(tp_size=2, pp_size=2, nextn=1), SHAPES, 0),
         ("Qwen/Qwen3-30B-A3B", dict(tp=2, attention_dp=2, moe_ep=4), dict(tp_size=2, attention_dp_size=2, moe_ep_size=4),
          SHAPES, 0),
         ("Qwen/Qwen3-32B", dict(tp=2), dict(tp_size=2), [(6000, 10, 4000, 500), (3000, 5, 4000, 300), (8000, 3, 4000, 20)],
          1000),
         # state kernels over the step's whole token count (models.yaml mixed_step_whole_tokens); Qwen3.5 attention DP
         ("Qwen/Qwen3.5-35B-A3B", dict(tp=1), dict(tp_size=1), SHAPES, 0),
         ("Qwen/Qwen3.5-35B-A3B", dict(tp=2, attention_dp=2, moe_tp=4), dict(tp_size=2, attention_dp_size=2, moe_tp_size=4),
          SHAPES, 0),
         ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", dict(tp=1), dict(tp_size=1), SHAPES, 0)]


# the MLA line: (model, system, backend, version, ours, reference kwargs)
MLA_CASES = [("moonshotai/Kimi-K3", "h200_sxm", "vllm", "0.24.0", dict(tp=8, moe_ep=8), dict(tp_size=8, moe_ep_size=8)),
             ("moonshotai/Kimi-K3", "b200_sxm", "sglang", "0.5.14", dict(tp=4, moe_ep=4),
              dict(tp_size=4, moe_ep_size=4)),
             ("zai-org/GLM-5-FP8", "h200_sxm", "sglang", "0.5.14", dict(tp=8, moe_ep=8), dict(tp_size=8, moe_ep_size=8)),
             ("deepseek-ai/DeepSeek-V3", "h200_sxm", "vllm", "0.24.0", dict(tp=8, moe_ep=8, nextn=1),
              dict(tp_size=8, moe_ep_size=8, nextn=1)),
             # no module rows at bfloat16 FMHA (the data's fallback for the fp8 checkpoint): the granular block in the
             # shared pass at the step's token count, under attention DP
             ("deepseek-ai/DeepSeek-V3", "h200_sxm", "sglang", "0.5.14",
              dict(tp=1, attention_dp=8, moe_tp=8, fmha_quant="bfloat16"),
              dict(tp_size=1, attention_dp_size=8, moe_tp_size=8, fmha_quant_mode="bfloat16"))]


@pytest.mark.parametrize("model,ours_kw,ref_kw,shapes,prefix", CASES)
def test_steps_match_reference_per_op(wheel_est, oracle, model, ours_kw, ref_kw, shapes, prefix):
    _check_steps(wheel_est, oracle, model, "h200_sxm", "vllm", "0.24.0", ours_kw, ref_kw, shapes, prefix)


@pytest.mark.parametrize("model,system,backend,version,ours_kw,ref_kw", MLA_CASES)
def test_mla_line_steps_match_reference_per_op(wheel_est, oracle, model, system, backend, version, ours_kw, ref_kw):
    _check_steps(wheel_est, oracle, model, system, backend, version, ours_kw, ref_kw, SHAPES[:3] + SHAPES[4:], 0)


@pytest.mark.parametrize("model,system,backend,version,ours_kw,ref_kw", MLA_CASES)
def test_mla_line_steps_with_a_cached_prefix_match_reference_per_op(wheel_est, oracle, model, system, backend, version,
                                                                     ours_kw, ref_kw):
    """A cached prefix on the MLA line: the shared pass's MLA block (module, or granular context MLA inside the
    fallback) over new + cached tokens at the cached part's causal share (cached_prefix.causal_prefix); a chunk of whole
    requests, a chunk beside decode requests and a chunk smaller than one request (nothing cached in the pass)."""
    _check_steps(wheel_est, oracle, model, system, backend, version, ours_kw, ref_kw,
                 [(512, 0, 256, 256), (256, 1, 256, 256), (2048, 30, 256, 256), (200, 3, 256, 256)], 128)


def _check_steps(wheel_est, oracle, model, system, backend, version, ours_kw, ref_kw, shapes, prefix):
    m = load_model(model)
    quants = resolve_quants(resolve_model(model), backend,
                            {"gemm": None, "moe": None, "kv": None, "fmha": ours_kw.get("fmha_quant")})
    d = replace(Deploy(system, backend, version, **ours_kw), **{f"{q}_quant": v["quant"] for q, v in quants.items()})
    engine = oracle.EngineHandle.compile(model, system, backend, backend_version=version, **ref_kw)._engine
    lists = [mixed_step(m, d, ctx_tokens=c, gen_requests=g, isl=i, osl=o, prefix=prefix) for c, g, i, o in shapes]
    lists += [decode_step(m, d, gen_requests=g, isl=i, osl=o) for c, g, i, o in shapes]
    priced = price_many(wheel_est, lists, wheel_est.spec(system))
    for (c, g, i, o), mixed, decode in zip(shapes, priced, priced[len(shapes):], strict=False):
        shared, ctx_attn, dec_attn = engine.mixed_step_breakdown_per_op(c, g, i, o, prefix, 1.0, 1.0)
        ref = {name.removeprefix("context_"): ms for name, ms, *_ in shared}
        ref[SCALED_CONTEXT] = sum(ms for _, ms, *_ in ctx_attn)
        ref["generation_attention"] = sum(ms for _, ms, *_ in dec_attn)
        ref_decode = {name.removeprefix("generation_"): ms for name, ms, *_ in engine.decode_step_per_op(g, i, o, 1.0)}
        for what, theirs, ours in (("mixed", ref, mixed), ("decode", ref_decode, decode)):
            for name, ms in theirs.items():
                if ms or name in ours:
                    assert ours[name] == pytest.approx(ms, rel=1e-9), f"{what} step {(c, g, i, o)} {name}"
