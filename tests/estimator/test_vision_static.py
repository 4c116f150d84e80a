"""The Qwen3-VL vision encoder in static estimates (models/vision.py): image token math, the ViT op list and the
language model over isl + image tokens, op by op equal to 0.12.0's `run_static` with images (its Python static path:
the compiled engine threads no image inputs), and its memory (the encoder beside the model); the CLI's image options.
Term-by-term memory parity over random VL deployments with images: benchmarks/memory_parity.py --images."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.estimator.models.config import model_config
from perfledger.estimator.models.memory import static_memory
from perfledger.estimator.models.plans.registry import load_model
from perfledger.estimator.models.vision import Images, image_tokens, vision

VL8B = "Qwen/Qwen3-VL-8B-Instruct"


def test_image_tokens_round_each_side_to_the_patch_merge_stride():
    """8B ViT: patch 16, merge 2 -> stride 32; 700 x 500 rounds to 704 x 512: 22 x 16 merged tokens, 44 x 32 patches;
    a side below the stride counts one stride."""
    v = vision(model_config(VL8B), load_model(VL8B).family)
    assert (v.depth, v.hidden, v.heads, v.instances, v.projector) == (27, 1152, 16, 4, ((4608, 4608), (4608, 4096)))
    assert v.tokens(Images(700, 500)) == (22 * 16, 44 * 32)
    assert v.tokens(Images(10, 10)) == (1, 4)
    assert image_tokens(v, Images(700, 500, 3)) == 3 * 352
    assert image_tokens(v, Images(0, 500, 3)) == 0 and image_tokens(v, None) == 0
    assert vision(model_config("Qwen/Qwen3-32B"), load_model("Qwen/Qwen3-32B").family) is None


def _reference(model, system, backend, version, tp, ep, batch, isl, osl, images: Images):
    from aiconfigurator_core.sdk import engine as E
    from aiconfigurator_core.sdk.backends.factory import get_backend
    from aiconfigurator_core.sdk.config import RuntimeConfig

    cfg = E.build_model_config(tp_size=tp, pp_size=1, attention_dp_size=1, moe_tp_size=1, moe_ep_size=ep,
                               gemm_quant_mode=None, kvcache_quant_mode=None, fmha_quant_mode=None, moe_quant_mode=None,
                               comm_quant_mode=None, forward_model=None, attention_backend=None,
                               enable_encoder_dp=images.encoder_dp)
    db = E._maybe_load_database(system, backend, version, None)
    rc = RuntimeConfig(batch_size=batch, beam_width=1, isl=isl, osl=osl, image_height=images.height,
                       image_width=images.width, num_images_per_request=images.count)
    return get_backend(backend).run_static(E.get_model(model, cfg, backend), db, rc, "static")


@pytest.mark.aic
@pytest.mark.parametrize("model,system,backend,version,tp,ep,dp", [
    (VL8B, "h200_sxm", "vllm", "0.24.0", 2, 1, True),
    (VL8B, "h200_sxm", "vllm", "0.24.0", 2, 1, False),
    ("Qwen/Qwen3-VL-30B-A3B-Instruct", "h200_sxm", "sglang", "0.5.14", 4, 4, True)],
    ids=["8b-tp2-encoder-dp", "8b-tp2-encoder-tp", "30b-a3b-tp4-ep4"])
def test_static_with_images_equals_the_reference_op_by_op(wheel_est, oracle, model, system, backend, version, tp, ep, dp):
    from perfledger.estimator.static import Deploy, static

    images, shape = Images(700, 500, 2, dp), dict(batch=3, isl=1000, osl=100)
    ref = _reference(model, system, backend, version, tp, ep, shape["batch"], shape["isl"], shape["osl"], images)
    ours = static(wheel_est, model, Deploy(system, backend, version, tp=tp, moe_ep=ep), images=images, **shape)
    phases = {"encoder": (ref.get_encoder_latency_dict(), ""), "context": (ref.get_context_latency_dict(), "context_"),
              "generation": (ref.get_generation_latency_dict(), "generation_")}
    for phase, (ops, prefix) in phases.items():
        ops = {name.removeprefix(prefix): ms for name, ms in ops.items() if name != f"{prefix}p2p"}
        assert set(ops) == set(ours[phase]), f"{phase}: op sets differ {set(ops) ^ set(ours[phase])}"
        for name, ms in ops.items():
            assert ours[phase][name] == pytest.approx(ms, rel=1e-9, abs=1e-15), f"{phase} {name}"
    assert len(ours["encoder"]) >= 15 and ours["encoder"]["encoder_attention"] > 0
    enc = sum(ref.get_encoder_latency_dict().values())
    assert ours["ttft_ms"] == pytest.approx(enc + sum(ref.get_context_latency_dict().values()), rel=1e-9)
    assert ours["tpot_ms"] == pytest.approx(sum(ref.get_generation_latency_dict().values()) / (shape["osl"] - 1), rel=1e-9)
    memory = static_memory(model, system, backend, tp=tp, moe_tp=1, moe_ep=ep, quants=ours["quants"], version=version,
                           images=images, **shape)
    theirs = ref.get_memory()  # isl + image tokens for activations / KV, the ViT's weights and activations beside
    for ours_key, their_key in (("weights", "weights"), ("kv", "kvcache"), ("activations", "activations"),
                                ("total", "total")):
        assert memory[ours_key] == pytest.approx(round(theirs[their_key], 3), abs=1e-9), ours_key
    assert memory["fits"] == (not ref.check_oom())


@pytest.mark.aic
def test_cli_image_options_price_the_encoder_into_the_ttft():
    args = ["estimate", "static", "--model", VL8B, "--system", "h200_sxm", "--backend", "vllm", "--version", "0.24.0",
            "--tp", "2", "--batch", "3", "--isl", "1000", "--osl", "100", "--data", "aic-package", "--json"]
    text = json.loads(CliRunner().invoke(app, args).stdout)
    res = CliRunner().invoke(app, [*args, "--image-height", "700", "--image-width", "500", "--num-images", "2", "--breakdown"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert text["encoder_ms"] == 0 and out["encoder_ms"] > 0
    ops = out["breakdown"]["ops"]
    assert out["ttft_ms"] == pytest.approx(sum(v["context"] for v in ops.values() if v["context"] is not None), rel=1e-12)
    assert out["ttft_ms"] - out["encoder_ms"] > text["ttft_ms"] and out["tpot_ms"] > text["tpot_ms"]  # 704 more tokens
    assert ops["encoder_dp_all_gather"]["context"] > 0 and ops["encoder_ar_1"]["context"] == 0  # whole images per rank
    sharded = json.loads(CliRunner().invoke(app, [*args, "--image-height", "700", "--image-width", "500",
                                                  "--disable-encoder-dp", "--breakdown"]).stdout)["breakdown"]["ops"]
    assert "encoder_dp_all_gather" not in sharded and sharded["encoder_ar_1"]["context"] > 0
