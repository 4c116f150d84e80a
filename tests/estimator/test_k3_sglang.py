"""Kimi-K3 static on sglang: split MLA plan, KDA from cross-backend rows and the KDA roofline, vs 0.12.0 per op."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest

from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import NoDataError
from perfledger.estimator.static import Deploy, static
from tests.estimator.k3_reference import K3, assert_same_ops, reference

L40S = ("l40s", "sglang", "0.5.14")
# (system, version, Deploy kwargs, shape): points where 0.12.0 and we both answer
POINTS = [
    ("l40s", "0.5.14", dict(tp=8, moe_ep=8), dict(batch=8, isl=4000, osl=200)),
    ("b200_sxm", "0.5.14", dict(tp=4, moe_ep=4), dict(batch=16, isl=1500, osl=40)),
    ("h200_sxm", "0.5.14", dict(tp=8, moe_tp=8), dict(batch=4, isl=3000, osl=20)),
    # past the 96-head conv grid (4-leaf util transfer); 0.5.16's 12-head decode routed through kda_fused_decode
    ("rtx_pro_6000_server", "0.5.14", dict(tp=1), dict(batch=32, isl=3355, osl=3)),
    ("b200_sxm", "0.5.16", dict(tp=8, moe_ep=8), dict(batch=8, isl=4000, osl=40)),
]


def _ref_kw(deploy: dict) -> dict:
    return dict(tp_size=deploy["tp"], moe_tp_size=deploy.get("moe_tp", 1), moe_ep_size=deploy.get("moe_ep", 1))


@pytest.mark.aic
@pytest.mark.parametrize("system,version,deploy,shape", POINTS)
def test_k3_sglang_static_matches_reference_per_op(wheel_est, oracle, system, version, deploy, shape):
    """Every op of both phases (split MLA, chunk_kda / decode KDA at tier sol, cross-backend conv) and TTFT/TPOT."""
    ours = static(wheel_est, K3, Deploy(system, "sglang", version, **deploy), **shape)
    assert_same_ops(ours, reference(oracle, system, "sglang", version, _ref_kw(deploy), shape), shape["osl"], rel=1e-9)


@pytest.mark.aic
def test_k3_sglang_kda_tiers_match_reference(wheel_est, oracle):
    """conv1d from vLLM rows (silicon), chunk_kda and both decode kernels on the roofline (sol), as 0.12.0 labels them."""
    _, _, phases = reference(oracle, *L40S, _ref_kw(dict(tp=8, moe_ep=8)), dict(batch=8, isl=4000, osl=200))
    tiers = {name: tier for ops in phases.values() for name, _, _, tier in ops}
    assert [tiers[n] for n in ("context_kda_conv1d", "context_kda_scan", "generation_kda_conv1d",
                               "generation_kda_recurrent")] == ["silicon", "sol", "sol", "sol"]
    base = {"system": "l40s", "backend": "sglang", "version": "0.5.14", "heads": 12, "batch": 8}
    q = pl.DataFrame([{**base, "kernel": "causal_conv1d_fn_qkv3", "phase": "context", "seq": 4000},
                      {**base, "kernel": "chunk_kda", "phase": "context", "seq": 4000}])
    assert estimate(wheel_est, "kda_kernel", q)["source"].to_list() == ["silicon", "sol"]
    q = pl.DataFrame([{**base, "kernel": k, "phase": "generation", "seq": 1}
                      for k in ("causal_conv1d_update", "fused_recurrent_kda_packed_decode")])
    assert estimate(wheel_est, "kda_kernel", q)["source"].to_list() == ["sol", "sol"]


@pytest.mark.aic
def test_k3_sglang_both_miss_the_896_expert_moe_at_ep8(wheel_est, oracle):
    """rtx_pro_6000_server sglang 0.5.14 has no ep-8 896-expert MoE rows: a typed miss here, a miss in 0.12.0 too."""
    with pytest.raises(NoDataError, match=r"moe_perf.*experts=896.*ep=8"):
        static(wheel_est, K3, Deploy("rtx_pro_6000_server", "sglang", "0.5.14", tp=8, moe_ep=8), batch=8, isl=4000, osl=200)
    with pytest.raises(Exception, match="MoE data missing"):
        reference(oracle, "rtx_pro_6000_server", "sglang", "0.5.14", _ref_kw(dict(tp=8, moe_ep=8)),
                  dict(batch=8, isl=4000, osl=200))


def test_sglang_plan_is_split_mla_and_sglang_kda_kernels(wheel_est):
    """The sglang branch comes from models.yaml: q_b/kv_b GEMMs + context MLA, BMMs around decode MLA, two decode kernels."""
    ours = static(wheel_est, K3, Deploy(*L40S, tp=8, moe_ep=8), batch=2, isl=1000, osl=3)
    assert {"mla_q_b_gemm", "mla_kv_b_gemm", "attention", "mla_o_gemm", "kda_scan"} <= set(ours["context"])
    assert {"bmm_pre", "bmm_post", "attention", "kda_conv1d", "kda_recurrent", "kda_onorm"} <= set(ours["generation"])
    assert "mla_block" not in ours["context"] and "kda_fused_decode" not in ours["generation"]
    assert all(v > 0 for phase in ("context", "generation") for k, v in ours[phase].items() if not k.endswith("_ar"))


def test_an_unknown_mla_form_in_models_yaml_is_named():
    from perfledger.estimator.models.plans.kimi_k3 import ops as k3_ops
    from perfledger.estimator.models.plans.registry import load_model

    m = load_model(K3)
    m = replace(m, family={**m.family, "backends": {"sglang": {**m.family["backends"]["sglang"], "mla": "fused"}}})
    with pytest.raises(ValueError, match="models.yaml: Kimi-K3 backend sglang: mla must be module or split, not 'fused'"):
        k3_ops(m, Deploy(*L40S, tp=8, moe_ep=8, moe_quant="w4a16_mxfp4"), 8, True, 1, 8)


def test_shared_tree_prices_k3_on_sglang_like_the_wheel(shared_est, wheel_est):
    """../shared (its manifest under aic/catalogs) and the wheel (manifest beside its tree) give the same K3 answer."""
    d = Deploy("h200_sxm", "sglang", "0.5.14", tp=8, moe_tp=8)
    ours = static(shared_est, K3, d, batch=4, isl=3000, osl=20)
    wheel = static(wheel_est, K3, d, batch=4, isl=3000, osl=20)
    assert ours["context"]["kda_conv1d"] == pytest.approx(wheel["context"]["kda_conv1d"], rel=1e-12)
    assert (ours["ttft_ms"], ours["tpot_ms"]) == (pytest.approx(wheel["ttft_ms"], rel=1e-12),
                                                  pytest.approx(wheel["tpot_ms"], rel=1e-12))
