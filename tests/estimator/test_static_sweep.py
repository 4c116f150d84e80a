"""Deployments pinned from the whole-model parity sweep (benchmarks/static_parity.py, seed 1): every op of both
phases, TTFT and TPOT within 1e-6 of 0.12.0's static (default checkpoint quants, SILICON or HYBRID), and the
fp8_block MoE alignment refusal both sides make."""

from __future__ import annotations

import importlib.util

import pytest

from estimator.assembly import Deploy, static
from estimator.errors import UnsupportedModelError
from tests.estimator.conftest import REPO

pytestmark = pytest.mark.aic


@pytest.fixture(scope="module")
def sweep():
    """The sweep tool itself (benchmarks/ is no package): its deployment runner and classifier."""
    spec = importlib.util.spec_from_file_location("static_parity", REPO / "benchmarks" / "static_parity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _d(model, kind, system, backend, version, tp, moe_tp, moe_ep, batch, isl, osl, mode):
    return {"model": model, "kind": kind, "system": system, "backend": backend, "version": version, "tp": tp,
            "moe_tp": moe_tp, "moe_ep": moe_ep, "batch": batch, "isl": isl, "osl": osl, "mode": mode}


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
