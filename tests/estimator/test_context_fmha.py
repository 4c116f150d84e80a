"""Context FMHA by data: the FMHA dtypes each context op's tables hold at a KV dtype equal 0.12.0's
context_fmha_supported_modes on a spread of wheel databases, and an inferred fp8 FMHA without fp8 rows falls back
to bfloat16 (with a note) while a flagged one is refused by name."""

from __future__ import annotations

import pytest

from perfledger.estimator.errors import UnsupportedModelError
from perfledger.estimator.models.config import model_config
from perfledger.estimator.quant.checkpoint import resolve
from perfledger.estimator.quant.context_fmha import context_op, fmha_modes, resolve_by_data, rules

pytestmark = pytest.mark.aic

# Every context op's tables, every backend, both FMHA outcomes (h200 sglang holds context MLA at bfloat16 only),
# DeepSeek-V4's raw fp8_e4m3 labels (sglang), and a database whose own version lacks tables an earlier one holds.
DATABASES = [
    ("h200_sxm", "sglang", "0.5.14"), ("b300_sxm", "sglang", "0.5.14"), ("b200_sxm", "trtllm", "1.3.0rc20"),
    ("h100_sxm", "trtllm", "1.3.0rc23"), ("gb300", "vllm", "0.27.0"), ("rtx_pro_6000_server", "vllm", "0.24.0"),
    ("l40s", "trtllm", "1.0.0"),
]


@pytest.mark.parametrize("system,backend,version", DATABASES)
def test_fmha_modes_are_the_reference_joint_slices(wheel_est, oracle, system, backend, version):
    from aiconfigurator_core.sdk.common import KVCacheQuantMode
    from aiconfigurator_core.sdk.perf_database import context_fmha_supported_modes

    db = oracle.get_database(system, backend, version, allow_unlisted_version=True)
    compared = 0
    for op in rules()["ops"]:
        for kv in ("bfloat16", "fp8"):
            ours = fmha_modes(wheel_est, system, backend, version, op, kv, shared=True)
            assert ours == context_fmha_supported_modes(db, op, KVCacheQuantMode[kv]), (op, kv)
            compared += bool(ours)
    assert compared, "no op held rows: the sample tests nothing"


def test_context_op_per_architecture_and_backend():
    assert context_op("DeepseekV3ForCausalLM", "sglang") == "context_mla"
    assert context_op("KimiK3ForConditionalGeneration", "vllm") == "context_attention"
    assert context_op("GlmMoeDsaForCausalLM", "trtllm") == "dsa_context_module"
    assert context_op("Qwen3ForCausalLM", "trtllm") == "context_attention"


def _quants(fmha_flag: str | None = None) -> dict:
    return resolve(model_config("deepseek-ai/DeepSeek-V3"), "sglang",
                   {"gemm": None, "moe": None, "kv": None, "fmha": fmha_flag}, builder_guards=False)


def test_inferred_fp8_without_fp8_rows_falls_back_to_bfloat16_with_a_note(wheel_est):
    quants = _quants()
    assert quants["fmha"] == {"quant": "fp8", "source": "checkpoint"}
    got = resolve_by_data(quants, "DeepseekV3ForCausalLM", wheel_est, "h200_sxm", "sglang", "0.5.14", shared=True)
    assert got["fmha"]["quant"] == "bfloat16" and got["fmha"]["source"] == "checkpoint"
    assert "context_mla" in got["fmha"]["note"] and "h200_sxm/sglang/0.5.14" in got["fmha"]["note"]
    assert {k: v for k, v in got.items() if k != "fmha"} == {k: v for k, v in quants.items() if k != "fmha"}


def test_flagged_fp8_without_fp8_rows_is_refused_by_name(wheel_est):
    with pytest.raises(UnsupportedModelError, match=r"--fmha-quant fp8 has no context_mla data for h200_sxm/sglang"):
        resolve_by_data(_quants("fp8"), "DeepseekV3ForCausalLM", wheel_est, "h200_sxm", "sglang", "0.5.14",
                        shared=True)


def test_fp8_rows_at_the_kv_dtype_or_no_rows_keep_the_checkpoint_fp8(wheel_est):
    """The slice is joint: h200 trtllm holds fp8 context attention only beside an fp8 KV cache."""
    quants = _quants()
    fp8_kv, bf16_kv = ({**quants, "kv": {"quant": kv, "source": "flag"}} for kv in ("fp8", "bfloat16"))
    where = ("h200_sxm", "trtllm", "1.3.0rc20")
    assert resolve_by_data(fp8_kv, "Qwen3ForCausalLM", wheel_est, *where, shared=True) == fp8_kv
    assert resolve_by_data(bf16_kv, "Qwen3ForCausalLM", wheel_est, *where, shared=True)["fmha"]["quant"] == "bfloat16"
    # l40s sglang has no DeepSeek-V4 module tables at all: no information, the checkpoint's fp8 stays
    assert fmha_modes(wheel_est, "l40s", "sglang", "0.5.14", "deepseek_v4_context_module", "bfloat16", shared=True) == []
    assert resolve_by_data(quants, "DeepseekV4ForCausalLM", wheel_est, "l40s", "sglang", "0.5.14", shared=True) == quants


def test_static_prices_the_fallback_as_an_explicit_bfloat16_fmha(wheel_est):
    """The estimate path applies the data fallback: the inferred-fp8 estimate equals the flagged-bfloat16 one."""
    from perfledger.estimator.static import Deploy, static

    def ttft(fmha):
        d = Deploy("h200_sxm", "sglang", "0.5.14", tp=8, moe_tp=1, moe_ep=8, fmha_quant=fmha)
        return static(wheel_est, "deepseek-ai/DeepSeek-V3", d, batch=2, isl=1000, osl=2)

    inferred, flagged = ttft(None), ttft("bfloat16")
    assert inferred["quants"]["fmha"]["quant"] == "bfloat16" and "note" in inferred["quants"]["fmha"]
    assert inferred["ttft_ms"] == pytest.approx(flagged["ttft_ms"], rel=1e-12)
    assert inferred["context"] == flagged["context"]


def test_cli_says_why_the_fmha_is_bfloat16():
    """`estimate static` names the fallback in both forms: a note line, and the fmha entry's `note` in --json; a
    flagged fp8 FMHA exits 1 (a typed estimator error) with the refusal."""
    import json

    from typer.testing import CliRunner

    from perfledger.cli import app

    args = ["estimate", "static", "--model", "deepseek-ai/DeepSeek-V3", "--system", "h200_sxm", "--backend", "sglang",
            "--version", "0.5.14", "--tp", "8", "--moe-ep", "8", "--batch", "2", "--isl", "500", "--osl", "4",
            "--data", "aic-package"]
    human = CliRunner().invoke(app, args)
    assert human.exit_code == 0 and "fmha bfloat16 (checkpoint)" in human.stdout
    assert "note: fmha fp8 (inferred from the checkpoint) has no context_mla data" in human.stdout
    doc = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert doc["quants"]["fmha"]["quant"] == "bfloat16" and "context_mla" in doc["quants"]["fmha"]["note"]
    refused = CliRunner().invoke(app, [*args, "--fmha-quant", "fp8"])
    assert refused.exit_code == 1 and "--fmha-quant fp8 has no context_mla data" in refused.output
