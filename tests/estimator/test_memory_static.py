"""Static-path memory of every architecture (models/memory.py) against the running 0.12.0: weights, KV, activations,
runtime, total per GPU and the fit / KV-fit decisions of its `run_static` (benchmarks/memory_parity.py's oracle)."""

import importlib.util
import json

import pytest

from perfledger.estimator.models.config import catalog, model_config
from perfledger.estimator.models.memory import MEMORY_YAML, _doc, deployment_memory, sized_model
from tests.estimator.conftest import REPO


@pytest.fixture(scope="module")
def parity(aic_core):
    """benchmarks/memory_parity.py (benchmarks/ is no package): its oracle, our side and the comparison."""
    spec = importlib.util.spec_from_file_location("memory_parity", REPO / "benchmarks" / "memory_parity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_architecture_has_a_memory_model(aic_core):
    """Every models.yaml architecture has a memory.yaml entry, and every wheel config of it is sized (no null memory)."""
    from pathlib import Path

    arches = set(catalog()["architectures"])
    assert arches - set(_doc()["architectures"]) == set(), f"{MEMORY_YAML.name} lacks these architectures"
    for path in sorted((Path(aic_core.__file__).parent / "model_configs").glob("*_config.json")):
        if path.name.endswith("_hf_quant_config.json"):
            continue
        arch = (json.loads(path.read_text()).get("architectures") or ["?"])[0]
        if arch in arches:
            model = path.name.removesuffix("_config.json").replace("--", "/", 1)
            mem = deployment_memory(model, "h200_sxm", "trtllm", tp=8, moe_ep=1, moe_tp=8,
                                    quants={"gemm": "bfloat16", "moe": "bfloat16", "kv": "bfloat16"}, batch=1, isl=64, osl=2)
            assert sized_model(model_config(model))[0] == arch and mem.weights > 0


def dep(model, system, backend, version, tp, moe_tp, moe_ep, batch, isl, osl, pp=1, gemm=None, moe=None, kv=None):
    return {"model": model, "system": system, "backend": backend, "version": version, "tp": tp, "pp": pp, "dp": 1,
            "moe_tp": moe_tp, "moe_ep": moe_ep, "batch": batch, "isl": isl, "osl": osl, "gemm_quant": gemm,
            "moe_quant": moe, "kv_quant": kv}


# Per architecture: window-crossing and short sequences, tp past the kv heads, pp 2, every backend, flagged quants.
DEPLOYMENTS = [
    dep("openai/gpt-oss-20b", "h200_sxm", "trtllm", "1.3.0rc20", 2, 1, 2, 64, 30000, 500),  # banded KV capped at 128
    dep("openai/gpt-oss-120b", "b200_sxm", "sglang", "0.5.14", 16, 1, 16, 8, 100, 20, kv="fp8"),
    dep("openai/gpt-oss-120b", "h100_sxm", "vllm", "0.24.0", 4, 4, 1, 200, 8000, 1000, pp=2),
    dep("meta-llama/Llama-4-Scout-17B-16E-Instruct", "h200_sxm", "trtllm", "1.3.0rc20", 8, 1, 8, 16, 20000, 200),
    dep("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "b200_sxm", "sglang", "0.5.14", 8, 8, 1, 4, 3000, 100, moe="fp8"),
    dep("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "h100_sxm", "vllm", "0.24.0", 4, 1, 4, 32, 1000, 100, pp=2),
    dep("stepfun-ai/Step-3.7-Flash", "h200_sxm", "sglang", "0.5.14", 8, 1, 8, 32, 12000, 300),  # banded KV at 512
    dep("stepfun-ai/Step-3.7-Flash-FP8", "b200_sxm", "trtllm", "1.3.0rc20", 4, 1, 4, 8, 300, 100),
    dep("stepfun-ai/Step-3.7-Flash-FP8", "h100_sxm", "vllm", "0.24.0", 16, 1, 16, 100, 4000, 400, kv="fp8"),
    dep("google/gemma-4-26B-A4B", "h200_sxm", "vllm", "0.24.0", 2, 1, 2, 64, 20000, 300),  # banded KV at 1024
    dep("nvidia/Gemma-4-26B-A4B-NVFP4", "b200_sxm", "trtllm", "1.3.0rc20", 4, 4, 1, 16, 500, 100),  # bf16 exclusions
    dep("nvidia/Gemma-4-31B-IT-NVFP4", "b200_sxm", "sglang", "0.5.14", 8, 8, 1, 128, 8000, 800, pp=2),
    dep("nvidia/Gemma-4-26B-A4B-NVFP4", "h100_sxm", "vllm", "0.24.0", 2, 1, 2, 8, 2000, 100, gemm="fp8"),  # exclusions dropped
    dep("nvidia/Llama-3_3-Nemotron-Super-49B-v1", "h200_sxm", "trtllm", "1.3.0rc20", 4, 1, 1, 64, 8000, 500),  # no KV
    dep("nvidia/Llama-3_3-Nemotron-Super-49B-v1", "h100_sxm", "sglang", "0.5.14", 16, 1, 1, 8, 200, 20, gemm="fp8"),
    dep("nvidia/Llama-3_3-Nemotron-Super-49B-v1", "l40s", "vllm", "0.24.0", 2, 1, 1, 1, 1000, 100, pp=2),
    dep("MiniMaxAI/MiniMax-M3", "h200_sxm", "sglang", "0.5.16", 8, 1, 8, 16, 10000, 200),  # no MSA weights, linear KV
    dep("nvidia/MiniMax-M3-NVFP4", "b200_sxm", "trtllm", "1.3.0rc23", 4, 4, 1, 64, 2000, 200, kv="fp8"),
    dep("MiniMaxAI/MiniMax-M3", "b200_sxm", "vllm", "0.24.0", 16, 1, 16, 4, 500, 50),
    dep("XiaomiMiMo/MiMo-V2-Flash", "h200_sxm", "trtllm", "1.3.0rc20", 8, 1, 8, 32, 16000, 300),  # linear KV, no cap
    dep("XiaomiMiMo/MiMo-V2-Flash", "b200_sxm", "sglang", "0.5.14", 4, 4, 1, 8, 600, 60, pp=2),
    dep("XiaomiMiMo/MiMo-V2-Flash", "h100_sxm", "vllm", "0.24.0", 16, 1, 16, 200, 2000, 200, kv="bfloat16"),
    # flagged GEMM quants: what 0.12.0 keeps of the checkpoint's exclusions and per-category quants then
    dep("zai-org/GLM-5.1", "h200_sxm", "sglang", "0.5.14", 8, 1, 8, 4, 1000, 100, gemm="fp8"),  # DSA at the flag
    dep("nvidia/GLM-5.2-NVFP4", "b200_sxm", "trtllm", "1.3.0rc20", 8, 8, 1, 4, 1000, 100, gemm="fp8"),  # excluded: bf16
    dep("nvidia/Qwen3.5-122B-A10B-NVFP4", "b200_sxm", "vllm", "0.24.0", 4, 1, 4, 8, 1000, 100, gemm="nvfp4"),
    dep("moonshotai/Kimi-K3", "b300_sxm", "sglang", "0.5.16", 8, 1, 8, 2, 1000, 100, gemm="fp8_block"),  # shared bf16
    # text_config's ignore globs: MLA projections stay bf16 under the flag, the shared experts take it
    dep("moonshotai/Kimi-K2.5", "h200_sxm", "sglang", "0.5.14", 8, 1, 8, 4, 1000, 100, gemm="fp8_block"),
    dep("moonshotai/Kimi-K2.5", "b300_sxm", "trtllm", "1.3.0rc20", 4, 1, 4, 7, 241, 211, gemm="fp8", moe="nvfp4"),
]


@pytest.mark.parametrize("d", DEPLOYMENTS, ids=lambda d: f"{d['model'].split('/')[1]}-{d['backend']}-tp{d['tp']}")
def test_static_memory_equals_the_reference(parity, d):
    ref, why = parity.reference(d)
    assert ref is not None, f"0.12.0 refused {d}: {why}"
    mem, labels = parity.ours(d)
    assert mem is not None, f"we refused {d}: {labels}"
    assert parity.compare(mem, ref) == []


@pytest.mark.parametrize("d", [DEPLOYMENTS[0], DEPLOYMENTS[9]], ids=["gpt-oss", "gemma-4"])
def test_the_oracle_is_run_statics_own_memory(parity, d):
    """What the sweep's oracle computes is the memory and the decisions of 0.12.0's whole `run_static` (~2 s each)."""
    from aiconfigurator_core.sdk import engine as E
    from aiconfigurator_core.sdk.backends.factory import get_backend
    from aiconfigurator_core.sdk.config import RuntimeConfig

    cfg = E.build_model_config(tp_size=d["tp"], pp_size=d["pp"], attention_dp_size=1, moe_tp_size=d["moe_tp"],
                               moe_ep_size=d["moe_ep"], gemm_quant_mode=None, kvcache_quant_mode=None, fmha_quant_mode=None,
                               moe_quant_mode=None, comm_quant_mode=None, forward_model=None, attention_backend=None)
    model = E.get_model(d["model"], cfg, d["backend"])
    database = E._maybe_load_database(d["system"], d["backend"], d["version"], None)
    summary = get_backend(d["backend"]).run_static(
        model, database, RuntimeConfig(batch_size=d["batch"], beam_width=1, isl=d["isl"], osl=d["osl"]), "static")
    bytes_, fits, kv_fits, _ = parity.reference(d)[0]
    assert {k: v * parity.GIB for k, v in summary.get_memory().items()} == pytest.approx(bytes_, rel=1e-12)
    assert (not summary.check_oom(), not summary.check_kv_cache_oom()) == (fits, kv_fits)


def test_the_planners_memory_fit_sizes_weights_for_its_backend(parity):
    """plan/fit.py sizes the weight terms for the worker's backend (sglang folds Qwen3.5's shared-expert gate away):
    a planner worker holds exactly what the static path and 0.12.0 size."""
    from perfledger.estimator.plan.fit import memory_model
    from perfledger.estimator.plan.space import Parallel

    d = dep("Qwen/Qwen3.5-35B-A3B", "h200_sxm", "sglang", "0.5.14", 2, 1, 2, 8, 1000, 100)
    quants = {"gemm": "bfloat16", "moe": "bfloat16", "kv": "bfloat16"}
    worker = memory_model(d["model"], d["system"], "sglang", d["version"], quants).worker(
        Parallel(tp=2, moe_ep=2), batch=8, seq_tokens=1100, tokens=8000)
    static = parity.ours(d)[0]
    assert worker.weights == static.weights == pytest.approx(parity.reference(d)[0][0]["weights"], rel=1e-12)
