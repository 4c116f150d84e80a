"""Static TTFT/TPOT against aiconfigurator-core's run_static: every op of both phases (attention included) equal."""

from __future__ import annotations

import pytest

from perfledger.estimator.static import Deploy, static

pytestmark = pytest.mark.aic
CASES = [
    ("Qwen/Qwen3-32B", dict(tp=2), dict(tp_size=2)),
    ("meta-llama/Meta-Llama-3.1-8B", dict(tp=1), dict(tp_size=1)),
    ("Qwen/Qwen3-235B-A22B", dict(tp=4, moe_ep=4), dict(tp_size=4, moe_tp_size=1, moe_ep_size=4)),
]


@pytest.mark.parametrize("model,ours_kw,ref_kw", CASES)
def test_static_matches_reference(wheel_est, oracle, model, ours_kw, ref_kw):
    deploy = Deploy("h200_sxm", "trtllm", "1.3.0rc20", **ours_kw)
    ours = static(wheel_est, model, deploy, batch=8, isl=4000, osl=200)
    engine = oracle.EngineHandle.compile(model, "h200_sxm", "trtllm", **ref_kw)
    ttft, gen_ms, _ = engine.run_static(batch_size=8, isl=4000, osl=200)
    ctx_ops, gen_ops = engine.run_static_per_op(batch_size=8, isl=4000, osl=200)[:2]
    for phase, ref_ops, prefix in (("context", ctx_ops, "context_"), ("generation", gen_ops, "generation_")):
        ref = {name.removeprefix(prefix): ms for name, ms, *_ in ref_ops if ms or name.removeprefix(prefix) in ours[phase]}
        names = set(ref) - {"p2p"}
        assert names <= set(ours[phase]), f"{phase}: ops we lack {names - set(ours[phase])}"
        for name in names:
            assert ours[phase][name] == pytest.approx(ref[name], rel=1e-9), f"{phase} {name}"
    assert ours["tpot_ms"] == pytest.approx(gen_ms / 199, rel=1e-9)
    assert ours["ttft_ms"] == pytest.approx(ttft, rel=1e-9)


K3_CASES = [(dict(tp=8, moe_ep=8), dict(tp_size=8, moe_tp_size=1, moe_ep_size=8), dict(batch=8, isl=4000, osl=200)),
            (dict(tp=1), dict(tp_size=1, moe_tp_size=1, moe_ep_size=1), dict(batch=1, isl=512, osl=2)),
            (dict(tp=4, moe_ep=4), dict(tp_size=4, moe_tp_size=1, moe_ep_size=4), dict(batch=16, isl=1500, osl=40))]


@pytest.mark.parametrize("ours_kw,ref_kw,shape", K3_CASES)
def test_kimi_k3_static_matches_reference_per_op(wheel_est, oracle, ours_kw, ref_kw, shape):
    """K3 (69 KDA + 24 MLA layers, latent MoE) on h200 vllm 0.24.0: every op within 1e-6, TTFT/TPOT too."""
    from tests.estimator.k3_reference import assert_same_ops, reference

    ours = static(wheel_est, "moonshotai/Kimi-K3", Deploy("h200_sxm", "vllm", "0.24.0", **ours_kw), **shape)
    assert_same_ops(ours, reference(oracle, "h200_sxm", "vllm", "0.24.0", ref_kw, shape), shape["osl"], rel=1e-6)


def test_kimi_k3_reference_point_and_gates(wheel_est):
    """The issue's point (TTFT 4460.39 ms, decode 6662.94 ms); a backend without a plan is a typed miss."""
    from perfledger.estimator.errors import UnsupportedModelError

    d = Deploy("h200_sxm", "vllm", "0.24.0", tp=8, moe_ep=8)
    ours = static(wheel_est, "moonshotai/Kimi-K3", d, batch=8, isl=4000, osl=200)
    assert ours["ttft_ms"] == pytest.approx(4460.392378091653, rel=1e-9)
    assert ours["tpot_ms"] * 199 == pytest.approx(6662.94135752911, rel=1e-9)
    assert ours["context"]["mla_block"] == pytest.approx(106.61228697001316, rel=1e-9)
    with pytest.raises(UnsupportedModelError, match="vllm, sglang, trtllm only .*not lmdeploy"):
        static(wheel_est, "moonshotai/Kimi-K3", Deploy("h200_sxm", "lmdeploy", "0.9.0", tp=8, moe_ep=8), batch=1,
               isl=128, osl=4)


def test_kimi_k3_prices_on_the_two_model_gb300_vllm_table(wheel_est, oracle):
    """gb300 vllm 0.27.0 holds DeepSeek-V3 (128-head) and K3 (96-head) MLA module rows: the plan's native_heads picks
    K3's, as 0.12.0 does (context mla_block 40.384 ms); every op of both phases, TTFT and TPOT equal 0.12.0's. The
    module op without native_heads stays a typed miss there."""
    from perfledger.estimator.batch import estimate_one
    from perfledger.estimator.errors import NoDataError
    from tests.estimator.k3_reference import assert_same_ops, reference

    shape = dict(batch=8, isl=4000, osl=200)
    ours = static(wheel_est, "moonshotai/Kimi-K3", Deploy("gb300", "vllm", "0.27.0", tp=8, moe_ep=8), **shape)
    assert ours["context"]["mla_block"] == pytest.approx(40.38371265945355, rel=1e-9)
    ref = reference(oracle, "gb300", "vllm", "0.27.0", dict(tp_size=8, moe_tp_size=1, moe_ep_size=8), shape)
    assert_same_ops(ours, ref, shape["osl"], rel=1e-9)
    q = dict(system="gb300", backend="vllm", version="0.27.0", fmha_quant="bfloat16", kv_quant="bfloat16",
             gemm_quant="bfloat16", heads=12, isl=4000, batch=8)
    with pytest.raises(NoDataError, match="native_heads"):
        estimate_one(wheel_est, "mla_context_module", **q)
