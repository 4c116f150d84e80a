"""Static deployment knobs against aiconfigurator-core 0.12.0: pipeline parallelism, MTP draft tokens, attention data
parallelism (MoE dispatch per backend; GQA MoE and the MLA line), cached prefix, every op of both phases; the MoE width rule
(moe_tp x moe_ep = tp x attention-dp) refused as 0.12.0 refuses it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.estimator.errors import UnsupportedModelError
from perfledger.estimator.models.cached_prefix import with_prefix
from perfledger.estimator.plan.space import ParallelWidthError, check_moe_width
from perfledger.estimator.static import Deploy, static
from tests.estimator.conftest import assert_static_equals_compiled

pytestmark = pytest.mark.aic
KNOBS = [("Qwen/Qwen3-32B", dict(tp=2, pp=2), dict(tp_size=2, pp_size=2)),
         ("Qwen/Qwen3-32B", dict(tp=1, pp=4, nextn=2), dict(tp_size=1, pp_size=4, nextn=2)),
         ("Qwen/Qwen3-30B-A3B", dict(tp=2, moe_ep=2, nextn=1), dict(tp_size=2, moe_tp_size=1, moe_ep_size=2, nextn=1)),
         ("Qwen/Qwen3-30B-A3B", dict(tp=1, attention_dp=4, moe_ep=4), dict(tp_size=1, attention_dp_size=4, moe_ep_size=4)),
         ("Qwen/Qwen3-30B-A3B", dict(tp=2, attention_dp=2, moe_ep=4), dict(tp_size=2, attention_dp_size=2, moe_ep_size=4)),
         ("Qwen/Qwen3-30B-A3B", dict(tp=1, attention_dp=8, moe_tp=8), dict(tp_size=1, attention_dp_size=8, moe_tp_size=8))]


DP_BACKENDS = [("sglang", "0.5.14", dict(tp=2, attention_dp=2, moe_ep=4), dict(tp_size=2, attention_dp_size=2, moe_ep_size=4)),
               ("sglang", "0.5.14", dict(tp=1, attention_dp=4, moe_tp=4), dict(tp_size=1, attention_dp_size=4, moe_tp_size=4)),
               ("trtllm", "1.3.0rc20", dict(tp=1, attention_dp=8, moe_ep=8), dict(tp_size=1, attention_dp_size=8,
                                                                                  moe_ep_size=8))]
# a cached prefix on every sequence-aware context op kind (models.yaml `cached_prefix`): GQA (near-fully cached too,
# and windowed), the MLA module and its fallback, split MLA, KDA, GDN, Mamba-2, DSA and MSA modules
EP8, REF_EP8 = dict(tp=8, moe_ep=8), dict(tp_size=8, moe_ep_size=8)
BF16_KV = dict(kv_quant="bfloat16", fmha_quant="bfloat16"), dict(kvcache_quant_mode="bfloat16", fmha_quant_mode="bfloat16")
PREFIX = [("vllm", "0.24.0", "Qwen/Qwen3-32B", dict(tp=2), dict(tp_size=2), 400),
          ("trtllm", "1.3.0rc20", "Qwen/Qwen3-30B-A3B", dict(tp=2, moe_ep=2), dict(tp_size=2, moe_ep_size=2), 900),
          ("vllm", "0.24.0", "Qwen/Qwen3-32B", dict(tp=2), dict(tp_size=2), 999),
          ("vllm", "0.24.0", "openai/gpt-oss-120b", dict(tp=2, moe_tp=2), dict(tp_size=2, moe_tp_size=2), 700),
          ("vllm", "0.24.0", "deepseek-ai/DeepSeek-V3", EP8, REF_EP8, 600),
          ("sglang", "0.5.14", "deepseek-ai/DeepSeek-V3", {**EP8, **BF16_KV[0]}, {**REF_EP8, **BF16_KV[1]}, 950),
          ("vllm", "0.24.0", "moonshotai/Kimi-K3", EP8, REF_EP8, 999),
          ("sglang", "0.5.14", "zai-org/GLM-5-FP8", EP8, REF_EP8, 300),
          ("trtllm", "1.3.0rc23", "MiniMaxAI/MiniMax-M3", EP8, REF_EP8, 500),
          ("vllm", "0.24.0", "Qwen/Qwen3.5-27B", dict(tp=2), dict(tp_size=2), 999),
          ("vllm", "0.24.0", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", dict(tp=2, moe_tp=2),
           dict(tp_size=2, moe_tp_size=2), 500)]
# attention DP on the MLA line: the experts over every rank's tokens, the dispatch collectives (K3 at its latent width)
MLA_DP = [("vllm", "0.24.0", "moonshotai/Kimi-K3", dict(tp=4, attention_dp=4, moe_tp=16),
           dict(tp_size=4, attention_dp_size=4, moe_tp_size=16), 0),
          ("sglang", "0.5.14", "zai-org/GLM-5-FP8", dict(tp=2, attention_dp=4, moe_ep=8),
           dict(tp_size=2, attention_dp_size=4, moe_ep_size=8), 0),
          ("vllm", "0.24.0", "deepseek-ai/DeepSeek-V3", dict(tp=1, attention_dp=8, moe_ep=8),
           dict(tp_size=1, attention_dp_size=8, moe_ep_size=8), 0)]
# attention DP on Qwen3.5-MoE (its own dispatch differences, models.yaml `attention_dp`), each backend
QWEN35_DP = [(be, ver, "Qwen/Qwen3.5-35B-A3B", ours, ref, 0) for be, ver in (("vllm", "0.24.0"), ("sglang", "0.5.14"),
                                                                            ("trtllm", "1.3.0rc20"))
             for ours, ref in ((dict(tp=1, attention_dp=4, moe_ep=4), dict(tp_size=1, attention_dp_size=4, moe_ep_size=4)),
                               (dict(tp=2, attention_dp=2, moe_tp=4), dict(tp_size=2, attention_dp_size=2, moe_tp_size=4)))]
CASES = ([("vllm", "0.24.0", *case, 0) for case in KNOBS] + QWEN35_DP
         + [(be, ver, "Qwen/Qwen3-30B-A3B", ours, ref, 0) for be, ver, ours, ref in DP_BACKENDS] + PREFIX + MLA_DP)


@pytest.mark.parametrize("backend,version,model,ours_kw,ref_kw,prefix", CASES)
def test_knobs_match_reference_per_op(wheel_est, oracle, backend, version, model, ours_kw, ref_kw, prefix):
    shape = dict(batch=8, isl=1000, osl=70)
    ours = static(wheel_est, model, Deploy("h200_sxm", backend, version, **ours_kw), **shape, prefix=prefix)
    engine = oracle.EngineHandle.compile(model, "h200_sxm", backend, backend_version=version, **ref_kw)
    ttft, gen_ms, _ = engine.run_static(batch_size=8, isl=1000, osl=70, prefix=prefix)
    ctx_ops, gen_ops = engine.run_static_per_op(batch_size=8, isl=1000, osl=70, prefix=prefix)[:2]
    for phase, ref_ops in (("context", ctx_ops), ("generation", gen_ops)):
        for name, ms, *_ in ref_ops:
            key = name.removeprefix(f"{phase}_")
            if ms or key in ours[phase]:
                assert ours[phase][key] == pytest.approx(ms, rel=1e-9), f"{phase} {key}"
    if ours_kw.get("pp", 1) > 1:
        assert ours["context"]["p2p"] > 0 and ours["generation"]["p2p"] > 0
    assert ours["ttft_ms"] == pytest.approx(ttft, rel=1e-9)
    assert ours["tpot_ms"] == pytest.approx(gen_ms / 69, rel=1e-9)


# attention DP on more GPUs and plans: TRT-LLM on sm 100 gathers fp8 / fp8_block / nvfp4 MoE activations quantized before the
# experts (moe_dispatch.yaml `quantized_pre`; gb300, sm 103, and w4a8_mxfp4_mxfp8 at half), on the GQA MoE, MLA and
# DeepSeek-V4 plans; attention DP on the DeepSeek-V4 (SGLang at its Blackwell MoE lane, vLLM), Nemotron-H, Gemma-4,
# hybrid MoE (Llama-4, MiMo-V2-Flash) and MiniMax-M3 plans, refused before 2026-12-07
REF_KNOB = {"tp": "tp_size", "attention_dp": "attention_dp_size", "moe_tp": "moe_tp_size", "moe_ep": "moe_ep_size",
            "gemm_quant": "gemm_quant_mode", "moe_quant": "moe_quant_mode", "kv_quant": "kvcache_quant_mode",
            "fmha_quant": "fmha_quant_mode"}
DSV4_TRTLLM = dict(gemm_quant="fp8_block", kv_quant="fp8")
GPU_DP = [("b200_sxm", "trtllm", "1.3.0rc20", "Qwen/Qwen3-30B-A3B", dict(tp=1, attention_dp=4, moe_ep=4, moe_quant="fp8")),
          ("gb200", "trtllm", "1.3.0rc20", "Qwen/Qwen3-30B-A3B", dict(tp=1, attention_dp=8, moe_ep=8, moe_quant="nvfp4")),
          ("gb300", "trtllm", "1.3.0rc20", "Qwen/Qwen3-30B-A3B", dict(tp=1, attention_dp=4, moe_ep=4, moe_quant="nvfp4")),
          ("b200_sxm", "trtllm", "1.3.0rc20", "deepseek-ai/DeepSeek-V3",
           dict(tp=1, attention_dp=8, moe_ep=8, moe_quant="nvfp4", fmha_quant="bfloat16")),
          ("b200_sxm", "trtllm", "1.3.0rc23", "deepseek-ai/DeepSeek-V4-Flash",
           dict(tp=1, attention_dp=4, moe_ep=4, moe_quant="fp8_block", **DSV4_TRTLLM)),
          ("b200_sxm", "trtllm", "1.3.0rc23", "deepseek-ai/DeepSeek-V4-Flash",
           dict(tp=1, attention_dp=4, moe_ep=4, moe_quant="w4a8_mxfp4_mxfp8", **DSV4_TRTLLM)),
          ("b200_sxm", "sglang", "0.5.14", "deepseek-ai/DeepSeek-V4-Flash",
           dict(tp=2, attention_dp=4, moe_ep=8, moe_quant="w4a8_mxfp4_mxfp8_trtllm")),
          ("b200_sxm", "vllm", "0.24.0", "deepseek-ai/DeepSeek-V4-Flash", dict(tp=1, attention_dp=8, moe_ep=8)),
          *[("h200_sxm", be, ver, model, knobs) for be, ver, model, knobs in (
              ("vllm", "0.24.0", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", dict(tp=1, attention_dp=4, moe_ep=4)),
              ("sglang", "0.5.14", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", dict(tp=2, attention_dp=2, moe_tp=4)),
              ("sglang", "0.5.14", "google/gemma-4-26B-A4B", dict(tp=1, attention_dp=4, moe_ep=4)),
              ("trtllm", "1.3.0rc20", "meta-llama/Llama-4-Scout-17B-16E-Instruct", dict(tp=1, attention_dp=4, moe_ep=4)),
              ("sglang", "0.5.14", "XiaomiMiMo/MiMo-V2-Flash", dict(tp=2, attention_dp=2, moe_tp=4)),
              ("vllm", "0.24.0", "MiniMaxAI/MiniMax-M3", dict(tp=1, attention_dp=4, moe_ep=4)))]]


@pytest.mark.parametrize("system,backend,version,model,knobs", GPU_DP)
def test_attention_dp_dispatch_per_gpu_generation_matches_reference(wheel_est, oracle, system, backend, version, model,
                                                                     knobs):
    ours = static(wheel_est, model, Deploy(system, backend, version, **knobs), batch=8, isl=1000, osl=70)
    engine = oracle.EngineHandle.compile(model, system, backend, backend_version=version,
                                         **{REF_KNOB[k]: v for k, v in knobs.items()})
    assert_static_equals_compiled(ours, engine, (8, 1000, 70), op_rel=1e-9)


def test_moe_width_mismatch_is_refused_like_the_reference(wheel_est, oracle):
    d = Deploy("h200_sxm", "vllm", "0.24.0", tp=4, moe_ep=2)
    with pytest.raises(ParallelWidthError, match="moe_tp 1 x moe_ep 2 = 2 must equal tp 4 x attention-dp 1 = 4"):
        static(wheel_est, "Qwen/Qwen3-30B-A3B", d, batch=1, isl=128, osl=2)
    with pytest.raises(ValueError, match="Parallelism width mismatch"):
        oracle.EngineHandle.compile("Qwen/Qwen3-30B-A3B", "h200_sxm", "vllm", backend_version="0.24.0", tp_size=4,
                                    moe_tp_size=1, moe_ep_size=2)
    check_moe_width(2, 4, 1, 8)  # attention dp widens the attention side: 2 x 4 = 1 x 8
    with pytest.raises(UnsupportedModelError, match="no attention TP"):
        static(wheel_est, "Qwen/Qwen3-30B-A3B", Deploy("h200_sxm", "trtllm", "1.3.0rc20", tp=2, attention_dp=2, moe_ep=4),
               batch=1, isl=128, osl=2)
    with pytest.raises(UnsupportedModelError, match="attention data parallelism needs a MoE model"):
        static(wheel_est, "Qwen/Qwen3-32B", Deploy("h200_sxm", "vllm", "0.24.0", tp=2, attention_dp=2), batch=1,
               isl=128, osl=2)


def test_static_cli_takes_the_knobs_and_refuses_a_bad_width():
    args = ["estimate", "static", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm",
            "--version", "0.24.0", "--batch", "4", "--isl", "512", "--osl", "8", "--data", "aic-package", "--json"]
    plain = json.loads(CliRunner().invoke(app, [*args, "--tp", "2"]).stdout)
    piped = CliRunner().invoke(app, [*args, "--tp", "2", "--pp", "2", "--nextn", "1"])
    assert piped.exit_code == 0, piped.output
    out = json.loads(piped.stdout)
    assert out["ttft_ms"] > plain["ttft_ms"] and out["memory"]["weights"] < plain["memory"]["weights"]
    bad = CliRunner().invoke(app, ["estimate", "static", "--model", "Qwen/Qwen3-30B-A3B", "--system", "h200_sxm",
                                   "--backend", "vllm", "--version", "0.24.0", "--batch", "1", "--isl", "64", "--osl", "2",
                                   "--tp", "4", "--moe-ep", "2", "--data", "aic-package", "--json"])
    assert bad.exit_code == 1 and "must equal tp 4" in json.loads(bad.stdout)["error"]
    usage = CliRunner().invoke(app, [*args, "--pp", "0"])
    assert usage.exit_code == 2


def test_prefix_rules_reach_nested_ops_and_refuse_unknown_sequence_ops():
    """The rules apply inside fallback / overlap groups; a sequence-aware op kind without a rule is refused, never
    priced as if nothing were cached."""
    rules = {"context_mla": {"length": "isl", "at": "whole", "causal_share": True},
             "gdn_kernel": {"length": "seq", "at": "new"}}
    ops = [("mla", "fallback", {"primary": [("m", "context_mla", {"isl": 1000}, 2.0)],
                                "fallback": [("g", "gdn_kernel", {"seq": 1000}, 1.0)]}, 1.0),
           ("dec", "overlap", {"groups": [[("g", "gdn_kernel", {"seq": 1000}, 1.0)]]}, 1.0),
           ("qkv", "gemm", {"m": 4000}, 1.0)]
    out = with_prefix(ops, 400, 1000, rules, where="M")
    assert out[0][2]["primary"] == [("m", "context_mla", {"isl": 1000}, 2.0 * (1 - 0.4 ** 2))]
    assert out[0][2]["fallback"][0][2] == {"seq": 600}
    assert out[1][2]["groups"][0][0][2] == {"seq": 600}
    assert out[2] == ops[2]
    with pytest.raises(UnsupportedModelError, match="not priced for the kda_kernel op"):
        with_prefix([("k", "kda_kernel", {"seq": 1000}, 1.0)], 400, 1000, rules, where="M")
