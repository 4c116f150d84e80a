"""DeepSeek-V4: the CSA / HCA attention module ops and mHC against aiconfigurator-core 0.12.0 on every slice holding
their tables, the whole-model static estimate against its compiled engine, and the plan's config reading."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from perfledger.estimator.batch import estimate_one
from perfledger.estimator.errors import EstimatorError, NoDataError, UnsupportedModelError
from perfledger.estimator.models.config import read_config, resolve_model
from perfledger.estimator.models.plans.registry import load_model
from perfledger.estimator.ops.dsv4.module import resolve_heads
from perfledger.estimator.ops.dsv4.topk import delta_ms
from perfledger.estimator.static import Deploy, static
from tests.estimator.conftest import assert_static_matches_engine

ARCH = "DeepseekV4ForCausalLM"
# (native heads, hidden, q_lora, index_topk, o_groups) of V4-Flash and V4-Pro
GEOMETRY = {"flash": (64, 4096, 1024, 512, 8), "pro": (128, 7168, 1536, 1024, 16)}


def _slices() -> list[tuple[str, str, str]]:
    import aiconfigurator_core

    data = Path(aiconfigurator_core.__file__).parent / "systems" / "data"
    return sorted({(p.parts[-4], p.parts[-2], p.parts[-1]) for p in data.glob("*/sparse_attention/*/*")
                   if any(p.glob("dsv4_*_module_perf.parquet"))})


def _reference(handle, oracle, op, kw):
    try:
        return handle.evaluate_ops_json(oracle.build([op]), **kw)[0][1]
    except Exception as exc:  # the reference's typed misses
        assert "PerfDataNotAvailable" in type(exc).__name__ or "Empirical" in type(exc).__name__, exc
        return None


def _ours(est, op: str, mode: str, **query):
    try:
        return estimate_one(est, op, mode=mode, **query)["latency_ms"]
    except EstimatorError:
        return None


def _attention_case(oracle, where, model, tp, kind, context, gemm, batch, isl, prefix):
    """(0.12.0 op, its evaluate kwargs, our op name, our query) for one attention module question."""
    from aiconfigurator_core.sdk import common
    from aiconfigurator_core.sdk.operations import ContextDeepSeekV4AttentionModule, GenerationDeepSeekV4AttentionModule

    native, hidden, q_lora, topk, groups = GEOMETRY[model]
    heads, o_groups, ratio = native // tp, max(1, groups // tp), 4 if kind == "csa" else 128
    cls = ContextDeepSeekV4AttentionModule if context else GenerationDeepSeekV4AttentionModule
    op = cls("a", 1.0, heads, native, tp, hidden, q_lora, 1024, 512, 64, 64, 128, topk, 128, ratio, o_groups,
             common.KVCacheQuantMode.fp8, common.FMHAQuantMode.bfloat16, common.GEMMQuantMode[gemm], architecture=ARCH)
    kw = dict(is_context=context, batch_size=batch, s=isl if context else isl + 1, x=batch * isl if context else batch)
    if context and prefix:
        kw["prefix"] = prefix
    query = dict(**where, kind=kind, fmha_quant="bfloat16", kv_quant="fp8", gemm_quant=gemm, native_heads=native,
                 heads=heads, hidden=hidden, q_lora=q_lora, o_lora=1024, head_dim=512, rope_dim=64, index_heads=64,
                 index_head_dim=128, index_topk=topk, window=128, o_groups=o_groups, batch=batch,
                 **(dict(isl=isl, prefix=prefix) if context else dict(seq=isl + 1)))
    return op, kw, "dsv4_context_module" if context else "dsv4_generation_module", query


def _assert_same(ours, ref, what):
    assert (ours is None) == (ref is None), f"one-sided miss {what}: ours={ours} ref={ref}"
    if ref is not None:
        assert ours == pytest.approx(ref, rel=1e-6), what


@pytest.mark.aic
def test_modules_and_mhc_match_reference_on_every_slice(wheel_est, oracle):
    """Per slice holding the DSV4 tables: a CSA or HCA question (context or decode, Flash or Pro, fp8_block or bf16
    GEMM, on- and off-grid shapes, prefixes) and an mHC one, SILICON; both sides miss alike, most are answered."""
    from aiconfigurator_core import _aiconfigurator_core as core
    from aiconfigurator_core.sdk import common

    rng, slices, answered = random.Random(4), _slices(), 0
    for system, backend, version in slices:
        where = dict(system=system, backend=backend, version=version)
        handle = oracle.handle(system, backend, version)
        for kind in (("csa", "hca")[len(where["system"]) % 2],):  # one kind per slice, both across slices
            args = (rng.choice(list(GEOMETRY)), rng.choice([1, 2, 4, 8]), kind, rng.random() < 0.5,
                    rng.choice(["fp8_block", "bfloat16"]), rng.choice([1, 3, 16, 64]), rng.choice([100, 1024, 6000, 20000]),
                    rng.choice([0, 0, 1024, 5000]))
            op, kw, name, query = _attention_case(oracle, where, *args)
            ref = _reference(handle, oracle, op, kw)
            _assert_same(_ours(wheel_est, name, "silicon", **query), ref, f"{name} {query}")
            answered += ref is not None
        hidden, phase, tokens = rng.choice([4096, 7168]), rng.choice(["pre", "post"]), rng.choice([7, 3000, 700000])
        op = core.DeepSeekV4MHCModule("m", 1.0, phase, hidden, 4, 20, common.GEMMQuantMode.bfloat16, architecture=ARCH)
        ref = _reference(handle, oracle, op, dict(is_context=True, batch_size=1, s=tokens, x=tokens))
        _assert_same(_ours(wheel_est, "mhc_module", "silicon", **where, phase=phase, hc_mult=4, hidden=hidden,
                           sinkhorn_iters=20, tokens=tokens), ref, f"mhc {phase} {hidden} {tokens} {where}")
    assert answered >= len(slices) // 2, f"{answered} of {len(slices)} module questions answered"


@pytest.mark.aic
@pytest.mark.parametrize("mode", ["HYBRID", "EMPIRICAL", "SOL"])
def test_modules_match_reference_in_every_mode(wheel_est, oracle, mode):
    """b200 sglang (the top-k calibrated slice): off-grid and prefixed shapes in the other modes."""
    for system, backend, version in (("b200_sxm", "sglang", "0.5.14"),):
        where, handle = dict(system=system, backend=backend, version=version), oracle.handle(system, backend, version, mode)
        for args in (("flash", 4, "csa", True, "fp8_block", 3, 3000, 1024), ("pro", 8, "hca", False, "bfloat16", 13, 20000, 0),
                     ("pro", 2, "csa", False, "fp8_block", 5, 700, 0)):
            op, kw, name, query = _attention_case(oracle, where, *args)
            _assert_same(_ours(wheel_est, name, mode.lower(), **query), _reference(handle, oracle, op, kw), f"{name} {args}")


def test_topk_delta_is_clamped_and_interpolated_prefix_first():
    table = {(0, 1024, 1): 0.2, (4096, 1024, 1): 0.6, (0, 2048, 1): 1.0, (0, 1024, 4): 0.4}
    assert delta_ms(table, 4096, 1024, 1) == 0.6  # exact
    assert delta_ms(table, 2048, 1024, 1) == pytest.approx(0.4)  # prefix between 0 and 4096
    assert delta_ms(table, 1_000_000, 1024, 1) == 0.6  # nearest value beyond the prefix range
    assert delta_ms(table, 0, 1536, 1) == pytest.approx(0.6)  # isl between 1024 and 2048
    assert delta_ms(table, 0, 1024, 2) == pytest.approx(0.2 + (0.4 - 0.2) / 3)  # batch between 1 and 4
    assert delta_ms(None, 0, 1024, 1) == 0.0


def test_head_keys_resolve_exact_only_below_else_smallest():
    assert resolve_heads([8, 16, 32], 16) == 16
    assert resolve_heads([64], 16) == 64
    assert resolve_heads([8, 32], 16) == 8
    assert resolve_heads([32, 64], 16) == 32
    assert resolve_heads([], 16) is None


@pytest.mark.aic
@pytest.mark.parametrize("model,system,backend,version,par,shape,quants", [
    ("deepseek-ai/DeepSeek-V4-Flash", "b200_sxm", "trtllm", "1.3.0rc23", (4, 1, 4), (16, 900, 40),
     dict(gemm="fp8_block", moe="fp8_block", kv="fp8")),
])
def test_static_matches_reference_per_op(wheel_est, oracle, model, system, backend, version, par, shape, quants):
    assert_static_matches_engine(wheel_est, oracle, model, system, backend, version, par, shape, quants)


def test_plan_counts_decoder_layers_only_and_swa_as_hca():
    """V4-Flash: 44 compress ratios for 43 layers (the last is the MTP layer's); its 2 leading SWA layers price as HCA."""
    m = load_model("deepseek-ai/DeepSeek-V4-Flash")
    assert len(m.plan_dims.ratios) == m.dims.layers == 43
    kinds = dict(m.plan_dims.kinds)
    assert kinds == {"hca": m.plan_dims.ratios.count(128) + m.plan_dims.ratios.count(0), "csa": m.plan_dims.ratios.count(4)}
    assert sum(kinds.values()) == m.dims.layers


def test_short_or_unknown_compress_ratios_are_refused(tmp_path):
    import json

    base = resolve_model("deepseek-ai/DeepSeek-V4-Flash").config
    for bad, match in (({"compress_ratios": [4] * 10}, "10 entries for 43 layers"),
                       ({"compress_ratios": [16] * 43}, r"compress_ratios \[16\] not priced")):
        path = tmp_path / "config.json"
        path.write_text(json.dumps({**base, **bad}))
        with pytest.raises(UnsupportedModelError, match=match):
            load_model(read_config(path))


@pytest.mark.aic
def test_missing_moe_rows_fail_loud_in_silicon(wheel_est):
    """The FP4-expert checkpoint on b200 sglang has no w4a8 MoE rows at its shape: SILICON refuses, HYBRID prices."""
    d = Deploy("b200_sxm", "sglang", "0.5.14", tp=4, moe_ep=4)
    with pytest.raises(NoDataError, match="moe_perf"):
        static(wheel_est, "deepseek-ai/DeepSeek-V4-Flash", d, batch=2, isl=500, osl=4)
    out = static(wheel_est, "deepseek-ai/DeepSeek-V4-Flash", d, batch=2, isl=500, osl=4, mode="hybrid")
    assert out["ttft_ms"] > out["context"]["attention"] > 0


@pytest.mark.aic
def test_a_miss_names_the_newer_versions_holding_the_table(wheel_est):
    """b200 TRT-LLM's default version (1.3.0rc20) holds no DeepSeek-V4 modules, rc23 does; back-fill reads older
    versions only, so the miss says where the rows are."""
    with pytest.raises(NoDataError, match=r"no dsv4_hca_context_module_perf rows for b200_sxm/trtllm/1\.3\.0rc20 .*; "
                                          r"b200_sxm/trtllm holds them at 1\.3\.0rc23$"):
        wheel_est.source.resolve("b200_sxm", "trtllm", "1.3.0rc20", "dsv4_hca_context_module_perf")


@pytest.mark.aic
def test_kv_cache_per_sequence_equals_the_reference():
    """Window-capped + compressed KV with the compressors' decode state: not linear in the sequence, equal 0.12.0's."""
    from aiconfigurator_core.sdk.config_builders import build_model_config
    from aiconfigurator_core.sdk.models import get_model

    from perfledger.estimator.models.memory import footprint, sized_model
    from tests.estimator.test_memory import system_doc

    model = "deepseek-ai/DeepSeek-V4-Pro"
    ref = get_model(model, build_model_config(tp_size=8, pp_size=1, attention_dp_size=1, moe_tp_size=1, moe_ep_size=8,
                                              gemm_quant_mode=None, kvcache_quant_mode=None, fmha_quant_mode=None,
                                              moe_quant_mode=None, comm_quant_mode=None), "sglang")
    arch, sized = sized_model(resolve_model(model))
    for seq in (1, 127, 129, 4099, 100_000):
        ours = footprint(arch, sized, system_doc("b200_sxm"), "sglang", tp=8, moe_tp=1, moe_ep=8,
                         quants={"gemm": "fp8_block", "moe": "w4a8_mxfp4_mxfp8", "kv": "fp8"}, batch=3, seq_tokens=seq,
                         tokens=256).kv
        assert ours == pytest.approx(3 * ref.get_kvcache_bytes_per_sequence(seq), rel=1e-12), seq
