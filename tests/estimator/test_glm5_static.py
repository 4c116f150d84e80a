"""GLM-5 static TTFT/TPOT and the DSA module ops against aiconfigurator-core 0.12.0 (same data: the wheel)."""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from perfledger.estimator.batch import estimate_one
from perfledger.estimator.errors import EmpiricalUnavailableError, MissingFlopsError, NoDataError, UnknownQuantError
from perfledger.estimator.models.plans.glm5 import _module_quant
from perfledger.estimator.models.plans.registry import load_model
from perfledger.estimator.quant.checkpoint import attention_bf16 as _attention_bf16
from perfledger.estimator.static import Deploy, static
from tests.estimator.conftest import assert_static_matches_engine
from tests.estimator.dsa_oracle import compare_dsa_modules

RULES = {"full_indexer": "full", "attention_block": "self_attn", "shared_experts": "shared_expert",
         "attention_groups": {"q": ["q_a_proj", "q_b_proj", "q_proj"], "kv": ["kv_a_proj", "kv_b_proj", "kv_proj"],
                              "o": ["o_proj"], "indexer": ["indexer"]}}

# (model, system, backend, version, (tp, moe_tp, moe_ep), (batch, isl, osl), (gemm, moe, kv) quants)
CASES = [
    ("zai-org/GLM-5-FP8", "b200_sxm", "sglang", "0.5.14", (8, 1, 8), (8, 4000, 200), ("fp8_block", "fp8_block", "fp8")),
    ("zai-org/GLM-5.2", "b200_sxm", "sglang", "0.5.14", (8, 1, 8), (16, 2048, 100), ("bfloat16", "bfloat16", "bfloat16")),
    ("nvidia/GLM-5.2-NVFP4", "gb200", "sglang", "0.5.14", (4, 1, 4), (32, 8000, 300), ("nvfp4", "nvfp4", "fp8")),
    ("zai-org/GLM-5.2-FP8", "h200_sxm", "vllm", "0.24.0", (8, 8, 1), (4, 3000, 120), ("fp8_block", "fp8_block", "fp8")),
    ("zai-org/GLM-5-FP8", "h100_sxm", "sglang", "0.5.14", (8, 1, 8), (64, 1500, 77), ("fp8_block", "fp8_block", "fp8")),
    ("zai-org/GLM-5", "b300_sxm", "trtllm", "1.3.0rc20", (4, 2, 2), (2, 20000, 40), ("bfloat16", "bfloat16", "bfloat16")),
]


@pytest.mark.aic
@pytest.mark.parametrize("model,system,backend,version,par,shape,quants", CASES)
def test_glm5_static_matches_reference_per_op(wheel_est, oracle, model, system, backend, version, par, shape, quants):
    """Every op of both phases (DSA module, overlapped MoE decode, skip-indexer blend) within 1e-6; TTFT/TPOT too."""
    gemm, moe, kv = quants
    assert_static_matches_engine(wheel_est, oracle, model, system, backend, version, par, shape, dict(gemm=gemm, moe=moe, kv=kv))


@pytest.mark.aic
def test_glm5_reference_point(wheel_est):
    """Pinned: GLM-5-FP8 on b200 sglang tp8/ep8, b8 isl4000 osl200 (attention is a ragged-bracket SOL rescale)."""
    d = Deploy("b200_sxm", "sglang", "0.5.14", tp=8, moe_ep=8, gemm_quant="fp8_block", moe_quant="fp8_block", kv_quant="fp8")
    ours = static(wheel_est, "zai-org/GLM-5-FP8", d, batch=8, isl=4000, osl=200)
    assert ours["ttft_ms"] == pytest.approx(881.7583709908478, rel=1e-9)
    assert ours["context"]["attention"] == pytest.approx(139.73392336074085, rel=1e-9)
    assert ours["generation"]["moe_overlap"] > 0 and "moe" not in ours["generation"]


def _query(rng):
    return dict(kv=rng.choice(["fp8", "bfloat16"]), gemm=rng.choice(["bfloat16", "fp8_block"]),
                heads=rng.choice([1, 8, 16, 32, 64, 128]), batch=rng.choice([1, 2, 3, 8, 16, 64, 256, 1024]),
                frac=rng.choice([1.0, 1.0, 21 / 78, 0.0]), isl=rng.choice([1, 16, 512, 1000, 2048, 3000, 8192, 40000]),
                prefix=rng.choice([0, 0, 512, 2048, 5000]), seq=rng.choice([2, 3, 129, 1025, 4001, 9000, 70000]))


@pytest.mark.aic
@pytest.mark.parametrize("system,backend,version", [("b200_sxm", "sglang", "0.5.14"), ("h100_sxm", "sglang", "0.5.14"),
                                                    ("h200_sxm", "vllm", "0.24.0"), ("gb200", "trtllm", "1.3.0rc20")])
def test_dsa_module_ops_match_reference(wheel_est, oracle, system, backend, version):
    """Random in-data, interpolated, ragged and out-of-grid queries: both miss, or agree within 1e-6 (SOL too)."""
    rng, handle = random.Random(f"{system}{backend}"), oracle.handle(system, backend, version)
    where = dict(system=system, backend=backend, version=version)
    answered = 0
    for _ in range(25):
        q = _query(rng)
        answered += compare_dsa_modules(wheel_est, oracle, handle, where, q, architecture="GlmMoeDsaForCausalLM",
                                        index_topk_freq=4, check_sol=q["frac"] == 1.0)
    assert answered >= 25


def test_full_fraction_and_module_quant_come_from_the_checkpoint():
    """GLM-5.2's indexer_types give 21/78 full layers; GLM-5 has none (all full); the FP8 checkpoint keeps attention bf16."""
    glm52, glm5 = load_model("zai-org/GLM-5.2"), load_model("zai-org/GLM-5-FP8")
    assert glm52.plan_dims.full_frac == pytest.approx(21 / 78) and glm5.plan_dims.full_frac == 1.0
    assert _module_quant(glm5.unquantized.attention, "fp8_block") == "bfloat16" and not glm5.unquantized.shared
    assert load_model("nvidia/GLM-5.2-NVFP4").unquantized.shared  # hf_quant_config excludes shared experts
    assert _module_quant(load_model("zai-org/GLM-5").unquantized.attention, "fp8_block") == "fp8_block"  # nothing excluded


@pytest.mark.parametrize("globs,expected", [
    (["model.layers.3.self_attn*"], {"q": True, "kv": True, "o": True, "indexer": True}),
    (["model.layers.0.self_attn.kv_a_layernorm"], {"q": True, "kv": True, "o": True, "indexer": True}),
    (["model.layers.0.self_attn.q_a_proj", "model.layers.0.self_attn.indexer.wk"],
     {"q": True, "kv": False, "o": False, "indexer": True}),
    (["lm_head", "model.layers.3.mlp.gate"], {"q": False, "kv": False, "o": False, "indexer": False}),
])
def test_attention_exclusion_globs(globs, expected):
    assert _attention_bf16(globs, RULES) == expected


def test_mixed_exclusions_key_the_module_by_the_o_projection():
    attention_bf16 = {"q": True, "kv": True, "o": False, "indexer": True}
    assert _module_quant(attention_bf16, "nvfp4") == "nvfp4"
    attention_bf16["o"] = True
    assert _module_quant(attention_bf16, "nvfp4") == "bfloat16"


@pytest.mark.aic
def test_typed_misses_and_modes(wheel_est):
    """No fp8-KV bf16-GEMM rows on h200 trtllm (0.12.0 misses too); SOL mode is the roofline; no EMPIRICAL."""
    q = dict(system="h200_sxm", backend="trtllm", version="1.3.0rc20", kv_quant="fp8", gemm_quant="bfloat16", heads=8,
             isl=2048, batch=8)
    with pytest.raises(NoDataError, match="dsa_context_module_perf.*kv_cache_dtype=fp8, gemm_type=bfloat16"):
        estimate_one(wheel_est, "dsa_context_module", **q)
    sol = estimate_one(wheel_est, "dsa_context_module", mode="sol", **q)
    assert sol["source"] == "sol" and sol["latency_ms"] == sol["sol_ms"] > 0
    with pytest.raises(EmpiricalUnavailableError):
        estimate_one(wheel_est, "dsa_context_module", mode="empirical", **q)
    with pytest.raises(UnknownQuantError, match="int4"):
        estimate_one(wheel_est, "dsa_context_module", **{**q, "kv_quant": "int4"})
    with pytest.raises(NoDataError, match="dsa_context_module_perf"):
        static(wheel_est, "zai-org/GLM-5-FP8", Deploy("h200_sxm", "trtllm", "1.3.0rc20", tp=8, moe_ep=8, kv_quant="fp8"),
               batch=8, isl=2048, osl=4)


@pytest.mark.aic
@pytest.mark.parametrize("op", ["dsa_context_module", "dsa_generation_module"])
def test_sol_without_fp8_tensor_cores_is_refused(wheel_est, op):
    """0.12.0 refuses GLM-5.1 (bf16) SOL on a100 for the missing fp8_tc_flops, below the index top-k too."""
    q = dict(system="a100_sxm", backend="trtllm", version="1.0.0", kv_quant="bfloat16", gemm_quant="bfloat16", heads=64,
             batch=21, **({"isl": 375} if op == "dsa_context_module" else {"seq": 400}))
    with pytest.raises(MissingFlopsError, match="fp8_tc_flops"):
        estimate_one(wheel_est, op, mode="sol", **q)
    with pytest.raises(MissingFlopsError, match="fp8_tc_flops"):
        static(wheel_est, "zai-org/GLM-5.1", Deploy("a100_sxm", "trtllm", "1.0.0"), batch=21, isl=375, osl=202, mode="sol")


@pytest.mark.aic
def test_cli_static_glm5_json():
    from perfledger.cli import app

    res = CliRunner().invoke(app, ["estimate", "static", "--model", "zai-org/GLM-5-FP8", "--system", "b200_sxm",
                                   "--backend", "sglang", "--version", "0.5.14", "--tp", "8", "--moe-ep", "8",
                                   "--gemm-quant", "fp8_block", "--moe-quant", "fp8_block", "--kv-quant", "fp8",
                                   "--batch", "8", "--isl", "4000", "--osl", "200", "--data", "aic-package", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["ttft_ms"] == pytest.approx(881.7583709908478, rel=1e-9)
