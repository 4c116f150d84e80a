"""Kimi-K3 static on trtllm: 0.12.0 walks the sglang plan there; SILICON misses the 896-expert MoE, HYBRID prices it.

No trtllm MoE table of the wheel holds a 896-expert row, so 0.12.0's static (SILICON) stops at the MoE on every
trtllm system and version, and so do we, naming the slice. In HYBRID the MoE falls through to EMPIRICAL and
0.12.0 prices the whole model (the imported support matrix's b300 / gb300 trtllm HYBRID_PASS rows): there we
compare every op of both phases and TTFT/TPOT. The reference's static entry point takes no database mode, so
`hybrid_reference` compiles its engine spec and sets the mode in it.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import NoDataError
from perfledger.estimator.models.plans.registry import load_model
from perfledger.estimator.static import Deploy, static
from tests.estimator.k3_reference import K3, assert_same_ops, reference

V = "1.3.0rc20"
# (system, Deploy kwargs, shape): every point prices in 0.12.0's HYBRID
POINTS = [
    ("gb300", dict(tp=8, moe_ep=8), dict(batch=8, isl=4000, osl=200)),
    ("h200_sxm", dict(tp=8, moe_tp=8), dict(batch=4, isl=3000, osl=20)),
    ("b200_sxm", dict(tp=4, moe_ep=4), dict(batch=16, isl=1500, osl=40)),
]


def _ref_kw(deploy: dict) -> dict:
    return dict(tp_size=deploy["tp"], moe_tp_size=deploy.get("moe_tp", 1), moe_ep_size=deploy.get("moe_ep", 1))


def hybrid_reference(system: str, ref_kw: dict, shape: dict):
    """reference()'s triple from 0.12.0's engine compiled as `compile_engine` does, run with database_mode HYBRID."""
    import aiconfigurator_core
    from aiconfigurator_core.sdk import engine as E

    cfg = E.build_model_config(pp_size=1, attention_dp_size=1, gemm_quant_mode=None, kvcache_quant_mode=None,
                               fmha_quant_mode=None, moe_quant_mode=None, comm_quant_mode=None, forward_model=None,
                               attention_backend=None, **ref_kw)
    version = E._literal_backend_version(system, "trtllm", V, None, None)
    spec = json.loads(E.build_engine_spec_json(
        E.get_model(K3, cfg, "trtllm"), model_path=K3, system=system, backend="trtllm", backend_version=version,
        kv_block_size=None, systems_path=None, nextn=0, database=E._maybe_load_database(system, "trtllm", version, None)))
    assert spec["engine"]["database_mode"] == "SILICON"
    spec["engine"]["database_mode"] = "HYBRID"
    engine = E.EngineHandle(aiconfigurator_core.engine_spec_bincode_from_json(json.dumps(spec)))
    ref_shape = dict(batch_size=shape["batch"], isl=shape["isl"], osl=shape["osl"])
    ttft, gen_ms, _ = engine.run_static(**ref_shape)
    ctx, gen = engine.run_static_per_op(**ref_shape)[:2]
    return ttft, gen_ms, {"context": ctx, "generation": gen}


@pytest.mark.aic
@pytest.mark.parametrize("system,deploy,shape", POINTS)
def test_k3_trtllm_hybrid_matches_reference_per_op(wheel_est, system, deploy, shape):
    """Every op of both phases (split MLA, chunk_kda and the decode pair on the roofline, MoE EMPIRICAL), TTFT, TPOT."""
    ours = static(wheel_est, K3, Deploy(system, "trtllm", V, **deploy), **shape, mode="hybrid")
    assert_same_ops(ours, hybrid_reference(system, _ref_kw(deploy), shape), shape["osl"], rel=1e-9)


@pytest.mark.aic
def test_k3_trtllm_tiers_match_reference(wheel_est, oracle):
    """No kda table on trtllm and no lender: all four KDA kernels on the roofline (sol); the MoE a quant transfer."""
    deploy, shape = dict(tp=8, moe_ep=8), dict(batch=8, isl=4000, osl=200)
    _, _, phases = hybrid_reference("gb300", _ref_kw(deploy), shape)
    tiers = {name: tier for ops in phases.values() for name, _, _, tier in ops}
    kda = ("context_kda_conv1d", "context_kda_scan", "generation_kda_conv1d", "generation_kda_recurrent")
    assert [tiers[n] for n in kda] == ["sol"] * 4
    assert (tiers["context_moe"], tiers["generation_moe"], tiers["context_attention"]) == ("empirical", "empirical", "silicon")
    base = {"system": "gb300", "backend": "trtllm", "version": V, "heads": 12, "batch": 8}
    q = pl.DataFrame([{**base, "kernel": k, "phase": p, "seq": 4000 if p == "context" else 1}
                      for k, p in (("causal_conv1d_fn_qkv3", "context"), ("chunk_kda", "context"),
                                   ("causal_conv1d_update", "generation"), ("fused_recurrent_kda_packed_decode", "generation"))])
    assert estimate(wheel_est, "kda_kernel", q)["source"].to_list() == ["sol"] * 4
    moe = {**base, "quant": "w4a16_mxfp4", "distribution": "power_law_1.01", "gated": True, "topk": 16, "experts": 896,
           "hidden": 3584, "inter": 3072, "tp": 1, "ep": 8, "tokens": 32000}
    # the static breakdown says `empirical` for any EMPIRICAL answer; the op's own provenance is the transfer label
    ours = estimate(wheel_est, "moe", pl.DataFrame([moe]), mode="hybrid").row(0, named=True)
    ref_ms, ref_label = oracle.moe("gb300", "trtllm", V, "w4a16_mxfp4", "power_law_1.01", True, 16, 896, 3584, 3072,
                                   1, 8, 32000, mode="HYBRID")
    assert (ours["latency_ms"], ours["source"]) == (pytest.approx(ref_ms, rel=1e-9), ref_label) and ref_label == "xshape"


@pytest.mark.aic
@pytest.mark.parametrize("system,deploy,shape", POINTS[:2])
def test_k3_trtllm_silicon_misses_the_896_expert_moe_like_reference(wheel_est, oracle, system, deploy, shape):
    """SILICON: a typed miss naming moe_perf and the 896-expert slice; 0.12.0's static misses the same MoE."""
    with pytest.raises(NoDataError, match=rf"moe_perf slice for system={system}, backend=trtllm.*experts=896"):
        static(wheel_est, K3, Deploy(system, "trtllm", V, **deploy), **shape)
    with pytest.raises(Exception, match="MoE data missing.*num_experts: 896"):
        reference(oracle, system, "trtllm", V, _ref_kw(deploy), shape)


def test_trtllm_plan_is_sglangs_split_plan():
    """models.yaml: trtllm shares the sglang plan (split MLA, chunk_kda, conv update + packed recurrent, decode onorm)."""
    backends = load_model(K3).family["backends"]
    assert backends["trtllm"] == backends["sglang"]
    assert backends["trtllm"]["mla"] == "split" and backends["trtllm"]["kda_scan"] == "chunk_kda"


def test_trtllm_op_list_is_the_split_one(wheel_est):
    """The trtllm branch runs the split MLA ops and the Triton decode pair, never vLLM's module or fused kernel."""
    ours = static(wheel_est, K3, Deploy("gb300", "trtllm", V, tp=8, moe_ep=8), batch=2, isl=1000, osl=3, mode="hybrid")
    assert {"mla_q_b_gemm", "mla_kv_b_gemm", "attention", "mla_o_gemm", "kda_scan"} <= set(ours["context"])
    assert {"bmm_pre", "bmm_post", "attention", "kda_conv1d", "kda_recurrent", "kda_onorm"} <= set(ours["generation"])
    assert "mla_block" not in ours["context"] and "kda_fused_decode" not in ours["generation"]
