"""DSA prefill under CP on the wheel's b200/sglang tables: breakdown identities, kernels, fail-loud range."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.estimator.batch import estimate_one
from perfledger.estimator.errors import EstimatorError, NoDataError
from perfledger.estimator.models.dsa_prefill import prefill_dsa

pytestmark = pytest.mark.aic
WHERE = ("zai-org/GLM-5-FP8", "b200_sxm", "sglang", "0.5.14")


def test_layer_is_dsa_plus_moe_plus_comm(wheel_est):
    out = prefill_dsa(wheel_est, *WHERE, isl=16384, cp=2)
    p = out["per_layer"]
    parts = ("dsa_base", "dsa_mqa_delta", "dsa_topk_delta", "dsa_allgather_index", "dsa_allgather_latent")
    assert p["dsa"] == pytest.approx(sum(p[k] for k in parts))
    assert p["layer"] == pytest.approx(p["dsa"] + p["moe"] + p["comm"])
    assert out["prefill_ms"] == pytest.approx(p["layer"] * out["num_layers"])
    assert out["base_kernel"] == "sglang_dsa_indexer_flashmla_sparse"


def test_moe_at_full_tokens_and_comm_in_elements(wheel_est):
    out = prefill_dsa(wheel_est, *WHERE, isl=8192, cp=4, batch=1)
    moe = estimate_one(wheel_est, "moe", system="b200_sxm", backend="sglang", version="0.5.14", quant="fp8_block",
                       distribution="power_law_1.01", gated=True, topk=8, experts=256, hidden=6144, inter=2048, tp=4, ep=1,
                       tokens=8192)["latency_ms"]
    ag = estimate_one(wheel_est, "comm", system="b200_sxm", op="all_gather", quant="half", num_gpus=4, elements=8192 * 6144)
    rs = estimate_one(wheel_est, "comm", system="b200_sxm", op="reduce_scatter", quant="half", num_gpus=4, elements=8192 * 6144)
    assert out["per_layer"]["moe"] == moe
    assert out["per_layer"]["comm"] == pytest.approx(ag["latency_ms"] + rs["latency_ms"])


def test_short_chunks_use_dense_ragged_kernel(wheel_est):
    out = prefill_dsa(wheel_est, *WHERE, isl=8192, cp=4)
    assert math.ceil(8192 / 4) <= 2048 and out["base_kernel"] == "sglang_dsa_dense_mha_trtllm_ragged"


def test_dense_first_k_reported_beside_default(wheel_est):
    out = prefill_dsa(wheel_est, *WHERE, isl=16384, cp=2, dense_first_k=True)
    p, k = out["per_layer"], out["first_k_dense"]
    assert k == 3
    expected = k * (p["dsa"] + p["dense_mlp"] + p["comm"]) + (out["num_layers"] - k) * p["layer"]
    assert out["prefill_dense_first_k_ms"] == pytest.approx(expected) and out["prefill_ms"] != expected


def test_isl_beyond_the_sparse_grid_fails_loud(wheel_est):
    with pytest.raises(NoDataError, match="isl=32768"):
        prefill_dsa(wheel_est, *WHERE, isl=32768, cp=8)


def test_bad_parallel_layout_and_unknown_model(wheel_est):
    with pytest.raises(EstimatorError, match="must equal cp"):
        prefill_dsa(wheel_est, *WHERE, isl=8192, cp=4, moe_tp=2, moe_ep=1)
    with pytest.raises(EstimatorError, match="no DSA lane"):
        prefill_dsa(wheel_est, "Qwen/Qwen3-32B", *WHERE[1:], isl=8192, cp=4)


def test_cli_prefill_dsa_json_and_exit_codes():
    runner = CliRunner()
    where = ["--system", WHERE[1], "--backend", WHERE[2], "--version", WHERE[3]]  # required, as for `static`
    res = runner.invoke(app, ["estimate", "prefill-dsa", "--model", WHERE[0], "--isl", "16384", "--cp", "2", *where,
                              "--data", "aic-package", "--dense-first-k", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert {"per_layer", "prefill_ms", "prefill_dense_first_k_ms"} <= set(out)
    bad = runner.invoke(app, ["estimate", "prefill-dsa", "--model", WHERE[0], "--isl", "32768", "--cp", "8", *where,
                              "--data", "aic-package", "--json"])
    assert bad.exit_code == 1 and "isl=32768" in json.loads(bad.stdout)["error"]
    assert runner.invoke(app, ["estimate", "prefill-dsa", "--model", WHERE[0], "--isl", "0", "--cp", "2", *where]).exit_code == 2
    unplaced = runner.invoke(app, ["estimate", "prefill-dsa", "--model", WHERE[0], "--isl", "16384", "--cp", "2"])
    assert unplaced.exit_code == 2 and "--system" in unplaced.output  # no silent b200/sglang default


@pytest.mark.parametrize("isl,cp", [(16384, 2), (8192, 4)])
def test_skip_indexer_layers_amortised_by_the_config_full_share(wheel_est, isl, cp):
    """GLM-5.2 (indexer_types: 21 of 78 full): skip layers pay their own base row + the latent AG only."""
    out = prefill_dsa(wheel_est, "zai-org/GLM-5.2", *WHERE[1:], isl=isl, cp=cp)
    p, w = out["per_layer"], out["full_layer_fraction"]
    assert w == pytest.approx(21 / 78)
    full = p["dsa_base"] + p["dsa_mqa_delta"] + p["dsa_topk_delta"] + p["dsa_allgather_index"] + p["dsa_allgather_latent"]
    assert p["dsa_full"] == pytest.approx(full)
    assert p["dsa_skip"] == pytest.approx(p["dsa_skip_base"] + p["dsa_allgather_latent"])
    assert p["dsa"] == pytest.approx(w * p["dsa_full"] + (1 - w) * p["dsa_skip"])
    # the two base rows are the module op's full / skip-indexer rows (bf16 KV, all 64 heads on one card)
    chunk = math.ceil(isl / cp)
    q = dict(system="b200_sxm", backend="sglang", version="0.5.14", kv_quant="bfloat16", gemm_quant="bfloat16",
             heads=64, isl=chunk, batch=1)
    assert p["dsa_skip_base"] == estimate_one(wheel_est, "dsa_context_module", full_frac=0.0, **q)["latency_ms"]
    assert p["dsa_base"] == estimate_one(wheel_est, "dsa_context_module", full_frac=1.0, **q)["latency_ms"]


def test_models_without_shared_index_price_every_layer_full(wheel_est):
    out = prefill_dsa(wheel_est, *WHERE, isl=16384, cp=2)
    assert out["full_layer_fraction"] == 1.0 and "dsa_skip" not in out["per_layer"]
