"""Per-GPU memory (estimator/models/memory.py): unit tests of the pure function and parity with 0.12.0's breakdown."""

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from perfledger.estimator.data.system_specs import load_spec
from perfledger.estimator.models.config import ModelConfig, model_config
from perfledger.estimator.models.memory import (
    GIB,
    Memory,
    MemoryModelError,
    deployment_memory,
    evaluate,
    footprint,
    sized_model,
)
from perfledger.estimator.models.priced import PricedModel

BF16 = {"gemm": "bfloat16", "moe": "bfloat16", "kv": "bfloat16"}


def dims_of(model: str) -> tuple[str, PricedModel]:
    return sized_model(model_config(model))


def system_doc(system: str) -> dict:
    return yaml.safe_load(open(load_spec(system).source).read())


def test_evaluate_is_arithmetic_only_and_names_the_place():
    assert evaluate("a * (b // 4) + max(c, 1) - min(2, 3) / 2", {"a": 3, "b": 9, "c": 0}, "x") == 3 * 2 + 1 - 1
    with pytest.raises(MemoryModelError, match="memory.yaml X.y: unknown name 'nope'"):
        evaluate("nope + 1", {}, "memory.yaml X.y")
    with pytest.raises(MemoryModelError, match="unsupported expression"):
        evaluate("__import__('os')", {}, "w")


def test_dense_weights_by_hand_and_fit_rule():
    """Qwen3-32B at TP2 bf16: every GEMM split by TP, embedding + logits bf16; 64 layers."""
    arch, dims = dims_of("Qwen/Qwen3-32B")
    h, L, v, inter = 5120, 64, 151936, 25600
    mem = footprint(arch, dims, system_doc("h200_sxm"), "trtllm", tp=2, moe_tp=1, moe_ep=1, quants=BF16,
                    batch=2, seq_tokens=1000, tokens=100)
    expect = 2 * (2 * v // 2 * h + L * h * (32 + 2 * 4) * 128 + L * 32 * 128 * h + L * 3 * h * inter // 2)
    assert mem.weights == expect
    assert mem.kv == 2 * 1000 * (L * 2 * 4 * 128 * 2)  # batch x tokens x (K and V of 4 kv heads per GPU)
    assert mem.activations == 73400320  # 2 x 100 x 8192 x 6.5 is under trtllm's 70 MiB floor
    assert mem.fits and mem.total < mem.capacity
    small = Memory(mem.weights, 0, 0, 0, 0, capacity=mem.weights)
    assert not small.fits  # 0.12.0: out of memory when total >= capacity
    js = mem.as_json()
    assert js["fits"] is True and js["unit"] == "GiB per GPU" and js["total"] == round(mem.total / GIB, 3)


def test_quant_bytes_come_from_quant_yaml():
    arch, dims = dims_of("Qwen/Qwen3-235B-A22B")
    doc = system_doc("h200_sxm")
    kw = {"tp": 8, "moe_tp": 1, "moe_ep": 8, "batch": 1, "seq_tokens": 1, "tokens": 1}
    bf16 = dict(footprint(arch, dims, doc, "vllm", quants=BF16, **kw).terms)
    fp8 = dict(footprint(arch, dims, doc, "vllm", quants={**BF16, "gemm": "fp8", "moe": "fp8"}, **kw).terms)
    assert fp8["experts"] == bf16["experts"] / 2 and fp8["qkv"] == bf16["qkv"] / 2
    assert fp8["router"] == bf16["router"] and fp8["embedding"] == bf16["embedding"]  # stay bf16


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["Qwen/Qwen3-32B", "Qwen/Qwen3-235B-A22B", "deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K3"]),
       st.sampled_from([1, 2, 4]), st.integers(1, 64), st.integers(1, 8192))
def test_more_shards_never_need_more_weights_and_kv_grows_with_batch(model, tp, batch, seq):
    arch, dims = dims_of(model)
    doc = system_doc("b200_sxm")
    def at(t, b):
        return footprint(arch, dims, doc, "sglang", tp=t, moe_tp=1, moe_ep=t, quants=BF16,
                                    batch=b, seq_tokens=seq, tokens=b)
    assert at(2 * tp, batch).weights <= at(tp, batch).weights
    assert at(tp, batch + 1).kv > at(tp, batch).kv


def test_bad_input_names_file_and_key():
    arch, dims = dims_of("Qwen/Qwen3-32B")
    with pytest.raises(MemoryModelError, match="no memory model for architecture 'Nope'"):
        footprint("Nope", dims, system_doc("h200_sxm"), "vllm", tp=1, moe_tp=1, moe_ep=1, quants=BF16,
                  batch=1, seq_tokens=1, tokens=1)
    with pytest.raises(MemoryModelError, match="sys.yaml: missing gpu.mem_capacity"):
        footprint(arch, dims, {"gpu": {}}, "vllm", tp=1, moe_tp=1, moe_ep=1, quants=BF16, batch=1, seq_tokens=1,
                  tokens=1, source="sys.yaml")
    with pytest.raises(MemoryModelError, match=r"cfg.json: none of \[.num_attention_heads.\] present \(models.yaml dims.heads\)"):
        sized_model(ModelConfig("cfg.json", Path("cfg.json"), {"hidden_size": 8}, {}))


def test_kimi_k3_does_not_fit_eight_b200s_but_fits_eight_b300s():
    """The reference's out-of-memory K3 rows: 181 GiB of weights per GPU at TP8/EP8 (MXFP4 experts)."""
    q = {**BF16, "moe": "w4a16_mxfp4"}
    b200 = deployment_memory("moonshotai/Kimi-K3", "b200_sxm", "sglang", tp=8, moe_ep=8, quants=q, batch=1, isl=384, osl=256)
    b300 = deployment_memory("moonshotai/Kimi-K3", "b300_sxm", "sglang", tp=8, moe_ep=8, quants=q, batch=1, isl=384, osl=256)
    assert round(b200.weights / GIB, 2) == 181.13 and not b200.fits and b300.fits


# --- parity with 0.12.0 (KVCacheEstimator's breakdown: same model build, same system YAML) -------------------
PARITY = [
    ("Qwen/Qwen3-32B", "h200_sxm", "trtllm", "1.3.0rc20", 1, 1, 1),
    ("Qwen/Qwen3-32B", "h200_sxm", "vllm", "0.24.0", 4, 1, 1),
    ("Qwen/Qwen3-32B", "h100_sxm", "sglang", "0.5.14", 16, 1, 1),
    ("Qwen/Qwen3-235B-A22B", "h200_sxm", "vllm", "0.24.0", 8, 1, 8),
    ("Qwen/Qwen3-235B-A22B", "h200_sxm", "trtllm", "1.3.0rc20", 4, 4, 1),
    ("Qwen/Qwen3-235B-A22B", "l40s", "sglang", "0.5.14", 2, 1, 2),
    ("deepseek-ai/DeepSeek-V3", "h200_sxm", "sglang", "0.5.14", 8, 1, 8),
    ("deepseek-ai/DeepSeek-V3", "h100_sxm", "trtllm", "1.3.0rc20", 8, 8, 1),
    ("deepseek-ai/DeepSeek-V3", "b200_sxm", "vllm", "0.24.0", 4, 1, 4),
    ("moonshotai/Kimi-K3", "b200_sxm", "sglang", "0.5.14", 8, 1, 8),
    ("moonshotai/Kimi-K3", "h200_sxm", "vllm", "0.24.0", 8, 1, 8),
    ("moonshotai/Kimi-K3", "b300_sxm", "sglang", "0.5.16", 4, 1, 4),
    ("zai-org/GLM-5-FP8", "b200_sxm", "sglang", "0.5.14", 8, 1, 8),
    ("nvidia/GLM-5.2-NVFP4", "gb200", "trtllm", "1.3.0rc20", 4, 4, 1),
    ("zai-org/GLM-5", "h200_sxm", "vllm", "0.24.0", 8, 8, 1),
    ("nvidia/DeepSeek-V3.1-NVFP4", "b200_sxm", "trtllm", "1.3.0rc20", 8, 1, 8),  # ModelOpt-excluded MLA q / kv bf16
    ("moonshotai/Kimi-K2.5", "h200_sxm", "sglang", "0.5.14", 8, 1, 8),  # DeepSeek-V3's terms under text_config
    ("nvidia/Kimi-K2.5-NVFP4", "b200_sxm", "vllm", "0.24.0", 4, 1, 4),
    ("deepseek-ai/DeepSeek-V3.2", "b200_sxm", "sglang", "0.5.14", 8, 1, 8),  # GLM-5's DSA terms
    ("nvidia/DeepSeek-V3.2-NVFP4", "gb200", "trtllm", "1.3.0rc20", 4, 4, 1),
    ("Qwen/Qwen3.5-35B-A3B", "h200_sxm", "vllm", "0.24.0", 4, 1, 4),  # GDN state per request beside full-attn KV
    ("Qwen/Qwen3.5-27B", "b200_sxm", "trtllm", "1.3.0rc20", 2, 1, 1),
    ("Qwen/Qwen3.5-397B-A17B", "gb200", "trtllm", "1.3.0rc20", 8, 1, 8),
    ("nvidia/Qwen3.5-397B-A17B-NVFP4", "b200_sxm", "vllm", "0.24.0", 4, 1, 4),
    ("nvidia/Qwen3.6-27B-NVFP4", "b200_sxm", "trtllm", "1.3.0rc20", 2, 1, 1),
    # NemotronH: embedding replicated, two-matrix experts at the latent width, KV on every layer, no SSM state (0.12.0)
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "h200_sxm", "trtllm", "1.3.0rc20", 2, 1, 2),
    ("nvidia/Nemotron-H-56B-Base-8K", "h200_sxm", "sglang", "0.5.14", 4, 1, 1),
    ("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4", "b200_sxm", "trtllm", "1.3.0rc20", 8, 1, 8),
    ("nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4", "b200_sxm", "vllm", "0.24.0", 2, 1, 2),
    ("deepseek-ai/DeepSeek-V4-Flash", "b200_sxm", "sglang", "0.5.14", 4, 1, 4),  # compressed KV, mHC, per-kind modules
    ("nvidia/DeepSeek-V4-Pro-NVFP4", "gb200", "trtllm", "1.3.0rc23", 8, 8, 1),
    ("Qwen/Qwen3.5-35B-A3B", "h200_sxm", "sglang", "0.5.14", 2, 1, 2),
]


@pytest.mark.parametrize("tokens", [256, 8192])
@pytest.mark.parametrize("model,system,backend,version,tp,moe_tp,moe_ep", PARITY)
def test_per_gpu_memory_equals_the_reference(model, system, backend, version, tp, moe_tp, moe_ep, tokens, aic_core):
    from aiconfigurator_core.sdk.config_builders import build_model_config
    from aiconfigurator_core.sdk.memory import KVCacheEstimator
    from aiconfigurator_core.sdk.models import get_model

    ref = KVCacheEstimator.from_request(model, system, backend, version, max_num_tokens=tokens, max_batch_size=1,
                                        tp_size=tp, moe_tp_size=moe_tp, moe_ep_size=moe_ep)._breakdown
    cfg = get_model(model, build_model_config(tp_size=tp, pp_size=1, attention_dp_size=1, moe_tp_size=moe_tp,
                                              moe_ep_size=moe_ep, gemm_quant_mode=None, kvcache_quant_mode=None,
                                              fmha_quant_mode=None, moe_quant_mode=None, comm_quant_mode=None), backend).config
    quants = {"gemm": cfg.gemm_quant_mode.name, "moe": cfg.moe_quant_mode.name, "kv": cfg.kvcache_quant_mode.name}
    arch, dims = dims_of(model)
    ours = footprint(arch, dims, system_doc(system), backend, tp=tp, moe_tp=moe_tp, moe_ep=moe_ep, quants=quants,
                     batch=1, seq_tokens=1, tokens=tokens, version=version)
    pairs = {"weights": (ours.weights, ref["weights_bytes"]), "kv (1 token)": (ours.kv, ref["kv_size_per_token_bytes"]),
             "activations": (ours.activations, ref["activations_bytes"]), "nccl": (ours.nccl, ref["comm_overhead_bytes"]),
             "others": (ours.others, ref["runtime_overhead_bytes"]),
             "capacity": (ours.capacity, ref["gpu_memory_capacity_bytes"])}
    for name, (a, b) in pairs.items():
        assert a == pytest.approx(b, rel=1e-9), f"{name}: ours {a} vs 0.12.0 {b}"


@pytest.mark.parametrize("model,system,backend,version,tp,moe_tp,moe_ep", PARITY)
def test_kv_budget_equals_the_reference_oom_check(model, system, backend, version, tp, moe_tp, moe_ep, aic_core):
    """The KV budget of 0.12.0's sweep OOM check: its backend's default fraction (vLLM by version), of-free or
    of-total, reserved and tolerance, over its own non-KV memory."""
    from aiconfigurator_core.sdk.backends.factory import get_backend
    from aiconfigurator_core.sdk.memory import kv_cache_budget_bytes

    be = get_backend(backend)
    reserved, tolerance = be.get_kv_cache_memory_check_params()
    arch, dims = dims_of(model)
    ours = footprint(arch, dims, system_doc(system), backend, tp=tp, moe_tp=moe_tp, moe_ep=moe_ep, quants=BF16,
                     batch=4, seq_tokens=512, tokens=2048, version=version)
    ref = kv_cache_budget_bytes(capacity=ours.capacity, non_kv=ours.total - ours.kv,
                                fraction=be.get_default_free_gpu_memory_fraction(version),
                                of_free=be.memory_fraction_of_free(), reserved=reserved, tolerance=tolerance)
    assert ours.kv_budget == pytest.approx(ref, rel=1e-12)


def test_static_memory_object_takes_the_static_estimates_quants():
    """What `estimate static --json` reports under "memory": GiB per GPU from static()'s resolved quants."""
    from perfledger.estimator.models.memory import static_memory

    quants = {"gemm": {"quant": "bfloat16", "source": "default"}, "moe": {"quant": "w4a16_mxfp4", "source": "checkpoint"},
              "kv": {"quant": "bfloat16", "source": "default"}, "fmha": {"quant": "bfloat16", "source": "default"}}
    out = static_memory("moonshotai/Kimi-K3", "h200_sxm", "vllm", tp=8, moe_tp=1, moe_ep=8, quants=quants,
                        batch=8, isl=4000, osl=200)
    assert set(out) == {"weights", "kv", "activations", "runtime", "total", "capacity", "fits", "kv_budget", "kv_fits", "unit"}
    assert (out["weights"], out["capacity"], out["fits"]) == (181.132, 141.0, False)
    assert out["kv"] == round(8 * (4200 * 24 * 576 * 2 + 69 * 5 * 12 * 128 * (4 * 128 + 18)) / GIB, 3)
    assert static_memory("meta-llama/Llama-4-Scout-17B-16E-Instruct", "b200_sxm", "sglang", tp=8, moe_tp=1, moe_ep=8,
                         quants=quants, batch=1, isl=1, osl=2)["fits"] is True


def test_static_path_kv_fraction_is_sglangs_derived_mem_fraction_static(aic_core):
    """0.12.0's static path (its disagg workers) sizes SGLang's KV pool with the mem_fraction_static the server derives
    from capacity and layout, not the 0.88 agg default: equal over capacity tiers, tp, pp and attention-dp."""
    from aiconfigurator_core.sdk.backends.sglang_backend import derive_sglang_mem_fraction_static

    from perfledger.estimator.models.memory import _doc, static_fraction

    rule = _doc()["backends"]["sglang"]["kv_budget"]["static"]
    for capacity in (16e9, 24e9, 40e9, 48e9, 80e9, 96e9, 151397597184, 192e9, 288e9):
        for tp, pp, dp in ((1, 1, 1), (2, 1, 1), (4, 1, 1), (8, 1, 1), (16, 1, 1), (2, 2, 1), (1, 1, 4), (2, 1, 8), (8, 4, 2)):
            assert static_fraction(rule, capacity, tp, pp, dp) == derive_sglang_mem_fraction_static(int(capacity), tp, pp, dp)
    arch, dims = dims_of("Qwen/Qwen3-32B")
    agg, static = (footprint(arch, dims, system_doc("h200_sxm"), "sglang", tp=1, moe_tp=1, moe_ep=1, quants=BF16, batch=52,
                             seq_tokens=4500, tokens=52, version="0.5.14", static_path=s) for s in (False, True))
    assert static.kv_budget > agg.kv_budget and agg.total == static.total
