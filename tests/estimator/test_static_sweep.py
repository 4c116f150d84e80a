"""Deployments pinned from the whole-model parity sweep (benchmarks/static_parity.py, seed 1): every op of both
phases, TTFT and TPOT within 1e-6 of 0.12.0's static (default checkpoint quants, SILICON or HYBRID), and the
fp8_block MoE alignment refusal both sides make."""

from __future__ import annotations

import pytest

from perfledger.estimator.errors import UnsupportedModelError
from perfledger.estimator.static import Deploy, static
from tests.estimator.conftest import sweep_deployment

pytestmark = pytest.mark.aic

_d = sweep_deployment


# drawn by the sweep, answered on both sides: families × checkpoints × modes × splits
AGREE = [
    _d("meta-llama/Meta-Llama-3.1-405B", "dense", "l40s", "trtllm", "1.3.0rc20", 1, 1, 1, 2, 4726, 2, "SILICON"),
    _d("Qwen/Qwen3-32B", "dense", "rtx_pro_6000_server", "vllm", "0.24.0", 8, 1, 1, 2, 2806, 2, "HYBRID"),
    _d("nvidia/Llama-3.1-70B-Instruct-FP8", "dense", "h200_sxm", "vllm", "0.24.0", 4, 1, 1, 5, 80, 16, "HYBRID"),
    _d("nvidia/GLM-5.3-NVFP4", "glm5", "b300_sxm", "trtllm", "1.3.0rc20", 1, 1, 1, 15, 342, 9, "SILICON"),
    _d("zai-org/GLM-5.3-FP8", "glm5", "gb200", "trtllm", "1.3.0rc23", 1, 1, 1, 38, 122, 22, "HYBRID"),
    _d("Qwen/Qwen3-30B-A3B-FP8", "moe", "b200_sxm", "sglang", "0.5.14", 1, 1, 1, 1, 90, 12, "SILICON"),
    _d("Qwen/Qwen3-235B-A22B-FP8", "moe", "gb200", "trtllm", "1.3.0rc23", 8, 2, 4, 44, 1806, 60, "SILICON"),
    # the valid split of the refused deployment below (768 / 2 = 384 = 3 blocks)
    _d("Qwen/Qwen3-30B-A3B-FP8", "moe", "b300_sxm", "trtllm", "1.3.0rc20", 8, 2, 4, 6, 3596, 168, "HYBRID"),
    # SOL with 0.12.0's SOL database (static_parity --modes EMPIRICAL,SOL, seed 1): the mamba conv rows are read in SOL
    _d("nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4", "nemotron_h", "rtx_pro_6000_server", "trtllm", "1.3.0rc20",
       4, 1, 4, 18, 2254, 111, "SOL"),
    # ... the own version's only: rc23 reads no rc20 conv rows in SOL (the roofline), as 0.12.0's SOL database
    _d("nvidia/Nemotron-H-56B-Base-8K", "nemotron_h", "gb300", "trtllm", "1.3.0rc23", 4, 1, 4, 6, 7437, 88, "SOL"),
    # the DSA indexer at the fp8 rate, which l40s (fp8 not 2 × bf16) tells from the bf16 one
    _d("zai-org/GLM-5.2-FP8", "glm5", "l40s", "trtllm", "1.3.0rc20", 8, 2, 4, 8, 4573, 101, "SOL"),
]


@pytest.mark.parametrize("d", AGREE, ids=lambda d: f"{d['model'].split('/')[1]}-{d['system']}-{d['backend']}-{d['mode']}")
def test_sweep_deployment_matches_reference_per_op(wheel_est, sweep, d):
    """No op, and neither TTFT nor TPOT, past 1e-6 relative; both sides answer."""
    row = sweep.run_one(wheel_est, d)
    assert row["outcome"] == "agree", row


def test_fp8_block_moe_split_across_a_weight_block_is_refused_like_the_reference(wheel_est, sweep):
    """Sweep find (was 'only they miss'): Qwen3-30B-A3B-FP8 at moe_tp 8 gives 768 / 8 = 96 intermediate columns per
    GPU, less than one 128-wide fp8 weight block; 0.12.0 rejects the deployment, so do we, naming the config."""
    d = _d("Qwen/Qwen3-30B-A3B-FP8", "moe", "b300_sxm", "trtllm", "1.3.0rc20", 8, 8, 1, 6, 3596, 168, "HYBRID")
    with pytest.raises(UnsupportedModelError, match=r"Qwen3-30B-A3B-FP8_config.json: moe_intermediate_size 768 / moe_tp 8 "
                                                    r"= 96 is not a multiple of the fp8_block weight block 128"):
        static(wheel_est, d["model"], Deploy(d["system"], d["backend"], d["version"], tp=8, moe_tp=8), batch=6,
               isl=3596, osl=168, mode="hybrid")
    assert sweep.run_one(wheel_est, d)["outcome"] == "both miss"


def test_alignment_applies_to_a_flagged_fp8_block_moe_on_a_bf16_checkpoint(wheel_est):
    """No quantization_config: the default 128 block; a bf16 MoE is never refused."""
    d = Deploy("b300_sxm", "trtllm", "1.3.0rc20", tp=8, moe_tp=8, moe_quant="fp8_block")
    with pytest.raises(UnsupportedModelError, match="weight block 128"):
        static(wheel_est, "Qwen/Qwen3-30B-A3B", d, batch=1, isl=128, osl=2)
    ours = static(wheel_est, "Qwen/Qwen3-30B-A3B", Deploy("b300_sxm", "trtllm", "1.3.0rc20", tp=8, moe_tp=8),
                  batch=1, isl=128, osl=2)
    assert ours["ttft_ms"] > 0


# Sweep finds fixed 2026-12-02 (both were all the sweep's disagreements): (a) 0.12.0's static engine heads the
# attention lane walk with the framework default (attention_lane_defaults.yaml: sm120 sglang -> flashinfer,
# sm100/103 -> triton) where its op-level handle ranks lanes by density; (b) a100_sxm sglang 0.5.10 / vllm 0.14.0
# attention tables lack window_size (was an untyped polars crash on our side, 'only we miss').
PINNED = [
    _d("Qwen/Qwen3-Coder-480B-A35B-Instruct", "moe", "rtx_pro_6000_server", "sglang", "0.5.14", 2, 1, 2, 52, 589, 219, "SILICON"),
    _d("Qwen/Qwen3-1.7B", "dense", "rtx_pro_6000_server", "sglang", "0.5.14", 2, 1, 1, 38, 84, 187, "SILICON"),
    _d("Qwen/Qwen3-8B", "dense", "rtx_pro_6000_server", "sglang", "0.5.14", 4, 1, 1, 49, 1999, 40, "HYBRID"),
    _d("meta-llama/Meta-Llama-3.1-405B", "dense", "b200_sxm", "sglang", "0.5.14", 1, 1, 1, 20, 110, 200, "SILICON"),
    _d("meta-llama/Meta-Llama-3.1-70B", "dense", "b300_sxm", "sglang", "0.5.16", 4, 1, 1, 8, 5104, 215, "SILICON"),
    _d("meta-llama/Meta-Llama-3.1-8B", "dense", "gb200", "sglang", "0.5.14", 4, 1, 1, 4, 2370, 291, "HYBRID"),
    _d("Qwen/Qwen3-32B-FP8", "dense", "gb300", "sglang", "0.5.14", 1, 1, 1, 60, 759, 296, "HYBRID"),
]
NO_WINDOW_COLUMN = [
    _d("Qwen/Qwen3-8B", "dense", "a100_sxm", "sglang", "0.5.10", 1, 1, 1, 31, 1084, 163, "HYBRID"),
    _d("Qwen/Qwen3-1.7B", "dense", "a100_sxm", "vllm", "0.14.0", 1, 1, 1, 3, 8591, 270, "SILICON"),
    _d("Qwen/Qwen3-235B-A22B", "moe", "a100_sxm", "vllm", "0.14.0", 8, 1, 8, 2, 167, 259, "SILICON"),
]


@pytest.mark.parametrize("d", PINNED + NO_WINDOW_COLUMN,
                         ids=lambda d: f"{d['model'].split('/')[1]}-{d['system']}-{d['backend']}-{d['version']}")
def test_pinned_lane_and_window_default_deployments_match_reference(wheel_est, sweep, d):
    row = sweep.run_one(wheel_est, d)
    assert row["outcome"] == "agree", row


def _reference_pinned(oracle, system, backend, version, op, table_attr, **shape):
    """0.12.0's op priced under the lane order its static engine resolves (resolved_lane_order_for_op)."""
    from aiconfigurator_core.sdk.operations.attention import resolved_lane_order_for_op

    op._lane_order = resolved_lane_order_for_op(oracle.get_database(system, backend, version), table_attr)
    return oracle.handle(system, backend, version).evaluate_ops_json(oracle.build([op]), **shape)[0][1]


# (system, version, head_dim): Blackwell's triton and trtllm_mha lanes overlap on head_dim 256 slices only
LANE_SLICES = [("rtx_pro_6000_server", "0.5.14", 128), ("b200_sxm", "0.5.14", 256), ("b300_sxm", "0.5.16", 256),
               ("gb200", "0.5.14", 256), ("gb300", "0.5.14", 256)]


@pytest.mark.parametrize("system,version,head_dim", LANE_SLICES)
def test_static_attention_lane_pin_matches_reference_op(wheel_est, oracle, system, version, head_dim):
    """Context and decode attention with lane_defaults=True equal 0.12.0's op under its static lane order, on
    shapes where the pinned head and the density head disagree (the check point: 48/4 heads, batch 52, isl 589)."""
    import polars as pl
    from aiconfigurator_core import _aiconfigurator_core as core

    from perfledger.estimator.batch import estimate

    kv = oracle.common.KVCacheQuantMode["bfloat16"]
    base = {"system": system, "backend": "sglang", "version": version, "kv_quant": "bfloat16", "head_dim": head_dim,
            "window": 0, "kv_heads": 4, "heads": 48, "lane_defaults": True}
    moved = 0  # answers the pin changes: the points must tell the two walks apart
    for isl, batch in ((589, 52), (2000, 4), (130, 17)):
        row = {**base, "fmha_quant": "bfloat16", "isl": isl, "batch": batch, "qk_norm": True}
        ours = estimate(wheel_est, "attention", pl.DataFrame({k: [v] for k, v in row.items()})).item(0, "latency_ms")
        plain = estimate(wheel_est, "attention", pl.DataFrame({k: [v] for k, v in {**row, "lane_defaults": False}.items()}))
        moved += plain.item(0, "latency_ms") != ours
        op = core.ContextAttention("a", 1.0, 48, 4, kv, oracle.common.FMHAQuantMode["bfloat16"], window_size=0,
                                   head_size=head_dim, use_qk_norm=True)
        ref = _reference_pinned(oracle, system, "sglang", version, op, "_context_attention_data", is_context=True,
                                batch_size=batch, s=isl, x=batch * isl)
        assert ours == pytest.approx(ref, rel=1e-6), (row, ours, ref)
        row = {**base, "batch": batch, "seq": isl}
        ours = estimate(wheel_est, "generation_attention", pl.DataFrame({k: [v] for k, v in row.items()})).item(0, "latency_ms")
        plain_row = {**row, "lane_defaults": False}
        plain = estimate(wheel_est, "generation_attention", pl.DataFrame({k: [v] for k, v in plain_row.items()}))
        moved += plain.item(0, "latency_ms") != ours
        op = core.GenerationAttention("g", 1.0, 48, 4, kv, window_size=0, head_size=head_dim)
        ref = _reference_pinned(oracle, system, "sglang", version, op, "_generation_attention_data", is_context=False,
                                batch_size=batch, s=isl, x=batch)
        assert ours == pytest.approx(ref, rel=1e-6), (row, ours, ref)
    assert moved >= 3, moved


def test_static_check_point_differs_from_op_level_walk(wheel_est):
    """The issue's numbers: pinned (flashinfer first) 0.8793036140680891 ms, density walk (triton first) 1.78986 ms."""
    import polars as pl

    from perfledger.estimator.batch import estimate

    row = {"system": "rtx_pro_6000_server", "backend": "sglang", "version": "0.5.14", "fmha_quant": "bfloat16",
           "kv_quant": "bfloat16", "head_dim": 128, "window": 0, "kv_heads": 4, "heads": 48, "isl": 589, "batch": 52,
           "qk_norm": True}
    frame = pl.DataFrame({k: [v] for k, v in row.items()})
    assert estimate(wheel_est, "attention", frame).item(0, "latency_ms") == pytest.approx(1.78986, rel=1e-5)
    pinned = frame.with_columns(pl.lit(True).alias("lane_defaults"))
    assert estimate(wheel_est, "attention", pinned).item(0, "latency_ms") == pytest.approx(0.8793036140680891, rel=1e-6)
