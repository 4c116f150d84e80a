"""Checkpoint quant inference: equal to aiconfigurator-core 0.12.0's defaults on every shipped model config,
flag > checkpoint > default precedence, named errors, and static TTFT/TPOT with defaults equal to 0.12.0's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from perfledger.estimator.errors import EstimatorError
from perfledger.estimator.models.config import read_config
from perfledger.estimator.quant.checkpoint import QUANTS, infer, resolve
from perfledger.estimator.static import Deploy, static

REPO = Path(__file__).resolve().parents[2]
SHARED_CONFIGS = REPO / ".." / "shared" / "aic" / "model_configs"
BACKENDS = ("trtllm", "sglang", "vllm")


def _wheel_configs() -> Path | None:
    from perfledger import settings

    package = settings.aic_package_dir()
    return package / "model_configs" if package is not None else None


def _config_files() -> list[Path]:
    dirs = [d for d in (_wheel_configs(), SHARED_CONFIGS) if d is not None and d.is_dir()]
    return sorted(p for d in dirs for p in d.glob("*_config.json") if not p.name.endswith("_hf_quant_config.json"))


def reference_quants(config: Path, backend: str, tmp: Path) -> dict[str, str]:
    """0.12.0's quants for unset flags (its model builder's defaults step). Configs it cannot load by HF id
    offline are read from a local checkpoint folder (config.json + hf_quant_config.json)."""
    from aiconfigurator_core.sdk.common import DefaultHFModels
    from aiconfigurator_core.sdk.config_builders import build_model_config
    from aiconfigurator_core.sdk.models import _get_model_info
    from aiconfigurator_core.sdk.models.helpers import _apply_model_quant_defaults

    stem = config.name.removesuffix("_config.json")
    model = stem.replace("--", "/", 1)
    if model not in DefaultHFModels:
        folder = tmp / stem
        folder.mkdir(exist_ok=True)
        shutil.copy(config, folder / "config.json")
        hf = config.with_name(f"{stem}_hf_quant_config.json")
        if hf.is_file():
            shutil.copy(hf, folder / "hf_quant_config.json")
        model = str(folder)
    info = dict(_get_model_info(model))
    cfg = build_model_config(tp_size=1, pp_size=1, attention_dp_size=1, moe_tp_size=1, moe_ep_size=1)
    _apply_model_quant_defaults(cfg, info.get("raw_config", {}), info["architecture"], backend)
    return {q: getattr(cfg, f).name for q, f in zip(QUANTS, ("gemm_quant_mode", "moe_quant_mode", "kvcache_quant_mode",
                                                            "fmha_quant_mode"), strict=True)}


@pytest.mark.aic
def test_every_model_config_infers_the_reference_quants(tmp_path, aic_core):
    """Wheel + ../shared model configs (FP8 block/static, NVFP4, ModelOpt mixed precision, compressed-tensors,
    mxfp4, DeepSeek-V4 experts) on three backends: gemm/moe/kv/fmha equal 0.12.0's."""
    configs = _config_files()
    assert len(configs) > 100
    differ = []
    for config in configs:
        for backend in BACKENDS:
            ours = {q: v["quant"] for q, v in resolve(read_config(config), backend, {}).items()}
            ref = reference_quants(config, backend, tmp_path)
            if ours != ref:
                differ.append((config.name, backend, ours, ref))
    assert not differ, differ[:5]


def test_fp8_block_nvfp4_and_compressed_tensors_labels():
    fp8 = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic"}}
    assert infer(fp8, {}) == {"gemm": "fp8_block", "moe": "fp8_block", "kv": "fp8", "fmha": "fp8"}
    per_tensor = {"quantization_config": {"quant_method": "fp8", "activation_scheme": "static"}}
    assert infer(per_tensor, {})["gemm"] == "fp8_static"
    assert infer({"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}, {})["gemm"] == "fp8"
    assert infer({}, {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}) == {"gemm": "nvfp4", "moe": "nvfp4", "kv": "fp8",
                                                                              "fmha": "fp8"}
    ct = {"architectures": ["X"], "text_config": {"quantization_config": {
        "quant_method": "compressed-tensors", "ignore": ["re:.*self_attn.*", "re:.*shared_experts.*"],
        "config_groups": {"g": {"weights": {"num_bits": 4, "type": "float"}}}}}}
    assert infer(ct, {}) == {"moe": "w4a16_mxfp4"}  # attention ignored: GEMM stays default; routed experts quantized
    assert infer({}, {}) == {}


def test_precedence_and_sources_glm5_fp8():
    """A flag wins; the checkpoint fills the rest; FMHA fp8 is guarded to bf16 on the DSA tables' backends."""
    config = SHARED_CONFIGS / "zai-org--GLM-5-FP8_config.json"
    out = resolve(read_config(config), "sglang", {"kv": "bfloat16"})
    assert out == {"gemm": {"quant": "fp8_block", "source": "checkpoint"}, "moe": {"quant": "fp8_block", "source": "checkpoint"},
                   "kv": {"quant": "bfloat16", "source": "flag"}, "fmha": {"quant": "bfloat16", "source": "checkpoint"}}
    bf16 = resolve(read_config(SHARED_CONFIGS / "Qwen--Qwen3-32B_config.json"), "trtllm", {})
    assert {v["source"] for v in bf16.values()} == {"default"} and {v["quant"] for v in bf16.values()} == {"bfloat16"}


def test_unknown_algorithm_and_kv_dtype_name_the_file_and_key(tmp_path):
    bad = tmp_path / "acme--M_config.json"
    bad.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "quantization_config": {"quant_method": "awq"}}))
    with pytest.raises(EstimatorError, match=r"acme--M_config.json: quant algorithm 'awq' is not in checkpoint_quant.yaml"):
        resolve(read_config(bad), "trtllm", {})
    bad.write_text(json.dumps({"quantization_config": {"quant_method": "fp8", "kv_cache_dtype": "int4"}}))
    kv_miss = r"acme--M_config.json: KV cache dtype 'int4' is not in checkpoint_quant.yaml kv_aliases"
    with pytest.raises(EstimatorError, match=kv_miss):
        resolve(read_config(bad), "trtllm", {})


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(p.name for p in SHARED_CONFIGS.glob("*_config.json") if "hf_quant" not in p.name)),
       backend=st.sampled_from(BACKENDS),
       flags=st.dictionaries(st.sampled_from(QUANTS), st.sampled_from(["bfloat16", "fp8", "nvfp4", "fp8_block"])))
def test_flags_only_replace_their_own_quant(name, backend, flags):
    config = read_config(SHARED_CONFIGS / name)
    plain, flagged = resolve(config, backend, {}), resolve(config, backend, flags)
    for q in QUANTS:
        assert flagged[q] == ({"quant": flags[q], "source": "flag"} if q in flags else plain[q])
        assert plain[q]["source"] in ("checkpoint", "default")


# (model, system, backend, version, (tp, moe_tp, moe_ep), (batch, isl, osl)): defaults only, no quant flags
POINTS = [
    ("zai-org/GLM-5-FP8", "b200_sxm", "sglang", "0.5.14", (8, 1, 8), (8, 4000, 200)),
    ("nvidia/GLM-5-NVFP4", "b200_sxm", "sglang", "0.5.14", (8, 1, 8), (8, 2000, 50)),
    ("Qwen/Qwen3-32B", "h200_sxm", "trtllm", "1.3.0rc20", (2, 1, 1), (8, 4000, 200)),
    ("meta-llama/Meta-Llama-3.1-8B", "h200_sxm", "trtllm", "1.3.0rc20", (1, 1, 1), (8, 4000, 200)),
    ("moonshotai/Kimi-K3", "h200_sxm", "vllm", "0.24.0", (8, 1, 8), (8, 4000, 200)),
    ("Qwen/Qwen3-235B-A22B-FP8", "h200_sxm", "trtllm", "1.3.0rc20", (4, 1, 4), (8, 4000, 200)),
    ("nvidia/Llama-3.1-70B-Instruct-FP8", "h200_sxm", "trtllm", "1.3.0rc20", (4, 1, 1), (8, 2000, 100)),
]


@pytest.mark.aic
@pytest.mark.parametrize("model,system,backend,version,par,shape", POINTS)
def test_static_with_checkpoint_defaults_matches_reference(wheel_est, oracle, model, system, backend, version, par, shape):
    """No quant flags on either side: every op of both phases, TTFT and TPOT equal 0.12.0's."""
    (tp, moe_tp, moe_ep), (batch, isl, osl) = par, shape
    ours = static(wheel_est, model, Deploy(system, backend, version, tp=tp, moe_tp=moe_tp, moe_ep=moe_ep),
                  batch=batch, isl=isl, osl=osl)
    engine = oracle.EngineHandle.compile(model, system, backend, backend_version=version, tp_size=tp,
                                         moe_tp_size=moe_tp, moe_ep_size=moe_ep)
    ttft, gen_ms, _ = engine.run_static(batch_size=batch, isl=isl, osl=osl)
    phases = dict(zip(("context", "generation"), engine.run_static_per_op(batch_size=batch, isl=isl, osl=osl)[:2], strict=True))
    for phase, ref_ops in phases.items():
        for name, ms, *_ in ref_ops:
            name = name.removeprefix(f"{phase}_")
            if name != "p2p" and (ms or name in ours[phase]):
                assert ours[phase][name] == pytest.approx(ms, rel=1e-9), f"{phase} {name}"
    assert ours["ttft_ms"] == pytest.approx(ttft, rel=1e-9)
    assert ours["tpot_ms"] == pytest.approx(gen_ms / (osl - 1), rel=1e-9)


@pytest.mark.aic
def test_cli_static_reports_quants_and_sources():
    from perfledger.cli import app

    args = ["estimate", "static", "--model", "zai-org/GLM-5-FP8", "--system", "b200_sxm", "--backend", "sglang",
            "--version", "0.5.14", "--tp", "8", "--moe-ep", "8", "--batch", "8", "--isl", "4000", "--osl", "200",
            "--data", "aic-package", "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["ttft_ms"] == pytest.approx(881.7583709908478, rel=1e-9)
    assert out["quants"]["gemm"] == {"quant": "fp8_block", "source": "checkpoint"}
    res = CliRunner().invoke(app, [*args, "--moe-quant", "bfloat16"])
    assert json.loads(res.stdout)["quants"]["moe"] == {"quant": "bfloat16", "source": "flag"}
