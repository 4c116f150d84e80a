"""NemotronH static plan (Mamba-2 / attention / MoE / MLP layers by the config's pattern, latent MoE) and its memory:
whole-model parity with 0.12.0's static engine and its memory breakdown, the layer pattern read both ways."""

from __future__ import annotations

import pytest

from perfledger.estimator.errors import EstimatorError
from perfledger.estimator.models.config import ModelConfig, model_config
from perfledger.estimator.models.plans.registry import load_model
from tests.estimator.conftest import assert_static_matches_engine

NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"


def test_layer_counts_from_the_pattern_string_and_from_the_block_list():
    """Nano spells its layers as hybrid_override_pattern, Ultra as layers_block_type (and no num_hidden_layers)."""
    nano, ultra = load_model(NANO), load_model("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16")
    pattern = model_config(NANO).config["hybrid_override_pattern"]
    own = nano.plan_dims
    assert (own.mamba_layers, own.moe_layers, own.attention_layers, own.mlp_layers) == \
        (pattern.count("M"), pattern.count("E"), pattern.count("*"), 0)
    assert own.latent == 0 and own.expert_width == nano.dims.hidden
    blocks = model_config("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16").config["layers_block_type"]
    u = ultra.plan_dims
    assert ultra.dims.layers == len(blocks) == u.mamba_layers + u.moe_layers + u.attention_layers + u.mlp_layers
    assert u.attention_layers == blocks.count("attention") and u.expert_width == u.latent > 0


def test_an_unknown_block_type_names_the_config_and_the_known_types(tmp_path):
    cfg = dict(model_config(NANO).config)
    cfg.pop("hybrid_override_pattern")
    cfg["layers_block_type"] = ["mamba", "moe", "conv"]
    with pytest.raises(EstimatorError, match=r"layers_block_type holds unknown block types \['conv'\] \(known: mamba"):
        load_model(ModelConfig("x", tmp_path / "config.json", cfg, {}))


@pytest.mark.aic
@pytest.mark.parametrize("model,system,par,shape", [
    (NANO, "h200_sxm", (2, 1, 2), (4, 1000, 20)),  # Mamba + attention + MoE, the conv Grid
    ("nvidia/Nemotron-H-56B-Base-8K", "h200_sxm", (4, 1, 1), (2, 3000, 10)),  # dense ReLU² MLP layers, d_state 256
    ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", "b200_sxm", (4, 1, 4), (8, 2000, 12)),  # latent MoE, nvfp4
])
def test_static_matches_the_engine_per_op(wheel_est, oracle, model, system, par, shape):
    cfg = load_model(model)
    quants = {"gemm": "bfloat16", "moe": "bfloat16", "kv": "bfloat16"} if "NVFP4" not in model else \
        {"gemm": "nvfp4", "moe": "nvfp4", "kv": "fp8"}
    assert cfg.family["kind"] == "nemotron_h"
    assert_static_matches_engine(wheel_est, oracle, model, system, "trtllm", "1.3.0rc20", par, shape, quants)


@pytest.mark.aic
def test_non_gated_moe_reads_the_gated_rows_where_the_table_has_no_non_gated_kernel(wheel_est, oracle):
    """vLLM's tables hold gated kernels only: Ultra's non-gated latent MoE reads them, as 0.12.0 does."""
    import polars as pl

    from perfledger.estimator.batch import estimate

    shape = {"system": "h200_sxm", "backend": "vllm", "version": "0.24.0", "quant": "fp8", "distribution": "power_law_1.01",
             "topk": 22, "experts": 512, "hidden": 2048, "inter": 5120, "tp": 1, "ep": 1}
    got = {gated: estimate(wheel_est, "moe", pl.DataFrame([{**shape, "gated": gated, "tokens": 300}]))
           for gated in (True, False)}
    ref = oracle.moe("h200_sxm", "vllm", "0.24.0", "fp8", "power_law_1.01", False, 22, 512, 2048, 5120, 1, 1, 300)[0]
    assert got[False]["source"][0] == "silicon" and got[False]["latency_ms"][0] == got[True]["latency_ms"][0]
    assert got[False]["latency_ms"][0] == pytest.approx(ref, rel=1e-9)
