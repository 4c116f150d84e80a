"""MiniMax-M3's MSA module ops and the M3 / MiMo-V2-Flash static plans against aiconfigurator-core 0.12.0.

Per op: random in-grid, interpolated and out-of-grid queries on slices holding the MSA tables (SILICON, HYBRID,
EMPIRICAL, SOL) and on one without them (the DSA-utilisation transfer, labelled `xop` as 0.12.0 labels it): both
sides miss, or agree within 1e-6 with the same label. Whole model: deployments through the sweep's runner (every
op of both phases, TTFT and TPOT within 1e-6)."""

from __future__ import annotations

import json
import random

import pytest

from perfledger.estimator.batch import estimate_one
from perfledger.estimator.errors import EmpiricalUnavailableError, EstimatorError, NoDataError
from perfledger.estimator.models.config import model_config, model_config_at
from perfledger.estimator.models.plans.registry import load_model
from tests.estimator.conftest import sweep_deployment

pytestmark = pytest.mark.aic
MSA_ARGS = (6144, 128, 128, 4, 128, 2048, 128)  # hidden, head dim, v head dim, index heads / dim, top-k, block


def _reference(oracle, where, mode, q):
    """(latency or None on the reference's typed miss, its provenance label) of one MSA module op."""
    from aiconfigurator_core.sdk import common
    from aiconfigurator_core.sdk.operations import ContextMSAModule, GenerationMSAModule

    quants = (common.KVCacheQuantMode[q["kv"]], common.FMHAQuantMode.bfloat16, common.GEMMQuantMode[q["gemm"]])
    cls = ContextMSAModule if q["phase"] == "context" else GenerationMSAModule
    op = cls("a", 1.0, q["heads"], q["kv_heads"], *MSA_ARGS, *quants, dsa_architecture="GlmMoeDsaForCausalLM",
             dsa_scale_k=1.0)
    kw = (dict(is_context=True, batch_size=q["batch"], s=q["isl"], prefix=0, x=q["batch"] * q["isl"])
          if q["phase"] == "context" else dict(is_context=False, batch_size=q["batch"], s=q["isl"], x=q["batch"]))
    handle = oracle.handle(*where, mode)
    try:
        return handle.evaluate_ops_json(oracle.build([op]), **kw)[0][1], handle.last_provenance()
    except Exception as exc:  # the reference's typed misses
        assert "NotAvailable" in type(exc).__name__ or "NotImplemented" in type(exc).__name__, exc
        return None, None


def _ours(est, where, mode, q):
    name, cols = (("msa_context_module", dict(isl=q["isl"], prefix=0)) if q["phase"] == "context"
                  else ("msa_generation_module", dict(seq=q["isl"])))
    query = dict(zip(("system", "backend", "version"), where, strict=True), kv_quant=q["kv"], gemm_quant=q["gemm"],
                 heads=q["heads"], kv_heads=q["kv_heads"], batch=q["batch"], **cols)
    try:
        out = estimate_one(est, name, mode=mode.lower(), **query)
    except (NoDataError, EmpiricalUnavailableError):
        return None, None
    return out["latency_ms"], out["source"]


# every slice family of the wheel's MSA tables (trtllm / vllm / sglang), l40s (fp8 rate not 2x bf16), and one
# version without them (h200 trtllm 1.3.0rc20: HYBRID / EMPIRICAL transfer from GLM-5's DSA rows)
@pytest.mark.parametrize("where", [("h200_sxm", "trtllm", "1.3.0rc23"), ("l40s", "vllm", "0.24.0"),
                                   ("b200_sxm", "sglang", "0.5.16"), ("h200_sxm", "trtllm", "1.3.0rc20")], ids=str)
def test_msa_module_ops_match_reference(wheel_est, oracle, where):
    rng, answered = random.Random(str(where)), 0
    for _ in range(12):
        tp = rng.choice([1, 2, 4, 8])
        q = dict(phase=rng.choice(["context", "generation"]), heads=64 // tp, kv_heads=max(1, 4 // tp),
                 kv=rng.choice(["bfloat16", "fp8"]), gemm=rng.choice(["bfloat16", "fp8_block"]),
                 batch=rng.choice([1, 3, 16, 33, 100, 300]), isl=rng.choice([17, 1000, 2048, 3000, 9000, 40000]))
        mode = rng.choice(["SILICON", "HYBRID", "EMPIRICAL", "SOL"])
        ref, label = _reference(oracle, where, mode, q)
        ours, source = _ours(wheel_est, where, mode, q)
        assert (ours is None) == (ref is None), f"one-sided miss {where} {mode} {q}: ours {ours} ref {ref}"
        if ref is not None:
            answered += 1
            assert ours == pytest.approx(ref, rel=1e-6), f"{where} {mode} {q}"
            assert (source == "xop") == (label == "xop"), f"{where} {mode} {q}: {source} vs {label}"
    assert answered >= 4


def test_msa_empirical_borrows_only_the_own_version(wheel_est):
    """gb200 trtllm 1.3.0rc23 holds no GLM-5 DSA rows of its own (1.3.0rc20 does): EMPIRICAL refuses, as 0.12.0."""
    with pytest.raises(EmpiricalUnavailableError, match="no dsa_context_module_perf rows of GlmMoeDsaForCausalLM"):
        estimate_one(wheel_est, "msa_context_module", mode="empirical", system="gb200", backend="trtllm",
                     version="1.3.0rc23", kv_quant="bfloat16", gemm_quant="bfloat16", heads=8, kv_heads=1, batch=4,
                     isl=1000, prefix=0)


def _d(model, system, backend, version, tp, moe_tp, moe_ep, batch, isl, osl, mode):
    return sweep_deployment(model, "-", system, backend, version, tp, moe_tp, moe_ep, batch, isl, osl, mode)


WHOLE = [
    _d("MiniMaxAI/MiniMax-M3", "h200_sxm", "trtllm", "1.3.0rc23", 8, 1, 8, 8, 2000, 50, "SILICON"),
    _d("MiniMaxAI/MiniMax-M3", "h200_sxm", "trtllm", "1.3.0rc20", 4, 1, 4, 4, 700, 20, "HYBRID"),  # xop attention
    _d("XiaomiMiMo/MiMo-V2-Flash", "h200_sxm", "sglang", "0.5.14", 4, 1, 4, 8, 1500, 40, "SILICON"),
]


@pytest.mark.parametrize("d", WHOLE, ids=lambda d: f"{d['model'].split('/')[1]}-{d['system']}-{d['backend']}-{d['mode']}")
def test_whole_model_matches_reference_per_op(wheel_est, sweep, d):
    row = sweep.run_one(wheel_est, d)
    assert row["outcome"] == "agree", row


def test_mimo_v2_flash_layer_types_and_geometry_come_from_the_config():
    """hybrid_layer_pattern 1 = global, moe_layer_freq 1 = MoE; banded kv heads / head dims from the swa_* keys."""
    cfg = model_config("XiaomiMiMo/MiMo-V2-Flash").config
    own = load_model("XiaomiMiMo/MiMo-V2-Flash").plan_dims
    assert own.global_attention == tuple(v == 1 for v in cfg["hybrid_layer_pattern"])
    assert own.moe == tuple(v == 1 for v in cfg["moe_layer_freq"])
    assert (own.window, own.banded_kv_heads, own.banded_head_dim, own.banded_v_head_dim, own.global_v_head_dim) == (
        cfg["sliding_window_size"], cfg["swa_num_key_value_heads"], cfg["swa_head_dim"], cfg["swa_v_head_dim"],
        cfg["v_head_dim"])


def test_mimo_v2_flash_pattern_of_the_wrong_length_is_an_error_naming_the_file(tmp_path):
    cfg = dict(model_config("XiaomiMiMo/MiMo-V2-Flash").config)
    cfg["hybrid_layer_pattern"] = cfg["hybrid_layer_pattern"][:-1]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(EstimatorError, match=r"config.json: hybrid_layer_pattern must hold 48 entries of 0 / 1"):
        load_model(model_config_at(path))
