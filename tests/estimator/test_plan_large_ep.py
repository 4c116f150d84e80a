"""The planner's MoE all-to-all switch (plan/large_ep.py) against 0.12.0: which DeepSeek-V3 layouts on 8 x h200 it
prices through DeepEP (vLLM's large-EP block over moe_a2a_perf; SGLang's DeepEP layer over the legacy DeepEP, wide-EP
MoE and wide-EP MLA tables), every op of their mixed and decode steps against 0.12.0's planner-built model, and the
agg answer of `aiconfigurator cli default` (top rows and Pareto front, switched rows among them)."""

from __future__ import annotations

import pytest

from perfledger.estimator.models.config import resolve_model
from perfledger.estimator.models.plans.registry import load_model
from perfledger.estimator.plan.agg import agg_search
from perfledger.estimator.plan.evaluate import price_many
from perfledger.estimator.plan.large_ep import PHASES, switched
from perfledger.estimator.plan.question import Question
from perfledger.estimator.plan.steps import decode_step, mixed_step
from perfledger.estimator.quant.checkpoint import resolve as resolve_quants
from perfledger.estimator.static import Deploy

pytestmark = pytest.mark.aic
MODEL, SYSTEM = "deepseek-ai/DeepSeek-V3", "h200_sxm"
VERSIONS = {"vllm": "0.24.0", "sglang": "0.5.14"}
QUESTION = Question(MODEL, SYSTEM, "vllm", 8, 4000, 500, 5000, 50, version="0.24.0")
SGLANG_QUESTION = Question(MODEL, SYSTEM, "sglang", 8, 4000, 500, 3000, 50, version="0.5.14")
DEEPEP = (("context", "deepep_ht"), ("generation", "deepep_ll"))


def _deploy(model: str, backend: str = "vllm", **parallel) -> tuple:
    m = load_model(model)
    quants = resolve_quants(resolve_model(model), backend, {"gemm": None, "moe": None, "kv": None, "fmha": None})
    return m, Deploy(SYSTEM, backend, VERSIONS[backend], **parallel,
                     **{f"{q}_quant": v["quant"] for q, v in quants.items()})


@pytest.mark.parametrize("backend,parallel,expected", [
    ("vllm", dict(tp=2, attention_dp=4, moe_ep=8), DEEPEP),
    ("vllm", dict(tp=1, attention_dp=8, moe_ep=8), DEEPEP),
    ("vllm", dict(tp=8, moe_ep=8), DEEPEP),
    ("vllm", dict(tp=2, attention_dp=4, moe_tp=8), ()),  # moe_tp > 1 stays fused
    ("vllm", dict(tp=2, attention_dp=2, moe_ep=4), ()),  # no rows at ep 4
    ("sglang", dict(tp=1, attention_dp=8, moe_ep=8), DEEPEP),
    ("sglang", dict(tp=8, moe_ep=8), DEEPEP),  # no attention DP needed
    ("sglang", dict(tp=4, attention_dp=2, moe_tp=2, moe_ep=4), ()),
    ("sglang", dict(tp=1, attention_dp=4, moe_ep=4), ()),  # DeepEP rows start at ep 8 (8 x node_num)
])
def test_switch_follows_the_data(wheel_est, backend, parallel, expected):
    m, d = _deploy(MODEL, backend, **parallel)
    assert switched(wheel_est, m, d, PHASES).moe_a2a == expected


def test_unmarked_family_stays_fused(wheel_est):
    m, d = _deploy("Qwen/Qwen3-30B-A3B", tp=2, attention_dp=4, moe_ep=8)
    assert switched(wheel_est, m, d, PHASES).moe_a2a == ()


def test_sglang_deepep_takes_the_wide_ep_quants_unless_named(wheel_est):
    """0.12.0 prices DeepSeek-V3's DeepEP layouts on SGLang at the wide-EP MLA rows' fp8_block FMHA / fp8 KV unless
    the question names them; a fused layout keeps the checkpoint's."""
    m, d = _deploy(MODEL, "sglang", tp=1, attention_dp=8, moe_ep=8)
    d = replace_quants(d, fmha="bfloat16", kv="bfloat16")
    assert (switched(wheel_est, m, d, PHASES).fmha_quant, switched(wheel_est, m, d, PHASES).kv_quant) == ("fp8_block", "fp8")
    named = switched(wheel_est, m, d, PHASES, {"kv": "bfloat16"})
    assert (named.fmha_quant, named.kv_quant) == ("fp8_block", "bfloat16")
    fused = replace_quants(_deploy(MODEL, "sglang", tp=1, attention_dp=8, moe_tp=8)[1], fmha="bfloat16", kv="bfloat16")
    assert switched(wheel_est, m, fused, PHASES) == fused


def replace_quants(d: Deploy, **quants) -> Deploy:
    from dataclasses import replace

    return replace(d, **{f"{role}_quant": q for role, q in quants.items()})


def _reference_engine(backend: str, tp: int, dp: int):
    """0.12.0's planner-built engine of the layout (its task's model config, with the comm backend it resolves)."""
    from tests.estimator.plan_oracle import planner_engine

    q = QUESTION
    ref, config = planner_engine(MODEL, SYSTEM, backend, VERSIONS[backend], (tp, 1, dp, 1, 8, 1), isl=q.isl, osl=q.osl,
                                 ttft=q.ttft, tpot=q.tpot)
    assert config.moe_comm_backend == dict(DEEPEP)
    return ref


@pytest.mark.parametrize("backend,tp,dp", [("vllm", 2, 4), ("vllm", 8, 1), ("sglang", 1, 8), ("sglang", 8, 1),
                                           ("sglang", 2, 4)])
def test_switched_steps_match_the_planner_model_per_op(wheel_est, backend, tp, dp):
    """Mixed and decode steps op by op at 1e-9: on-grid and off-grid token counts (the wide-EP MoE's edge util, the
    wide-EP MLA's ragged corners), a cached prefix on SGLang."""
    ref = _reference_engine(backend, tp, dp)
    m, d = _deploy(MODEL, backend, tp=tp, attention_dp=dp, moe_ep=8)
    d = switched(wheel_est, m, d, PHASES)
    shapes = [(4000, 7, 4000, 500, 0), (8000, 30, 4000, 500, 0)]
    if backend == "sglang":
        shapes += [(333, 16, 4000, 500, 0), (1500, 3, 4000, 500, 0), (8000, 31, 4000, 500, 1000), (70000, 5, 300, 50, 0)]
    lists = [mixed_step(m, d, ctx_tokens=c, gen_requests=g, isl=i, osl=o, prefix=p) for c, g, i, o, p in shapes]
    lists += [decode_step(m, d, gen_requests=g, isl=i, osl=o) for _, g, i, o, _ in shapes]
    priced = price_many(wheel_est, lists, wheel_est.spec(SYSTEM))
    for (c, g, i, o, p), mixed, decode in zip(shapes, priced, priced[len(shapes):], strict=False):
        shared, context, generation = ref.mixed_step_breakdown_per_op(c, g, i, o, p, 1.0, 1.0)
        theirs = {"mixed": {n.removeprefix("context_"): ms for n, ms, *_ in shared},
                  "decode": {n.removeprefix("generation_"): ms for n, ms, *_ in ref.decode_step_per_op(g, i, o, 1.0)}}
        if backend == "sglang":
            theirs["mixed"] |= {"context_attention (scaled)": sum(ms for _, ms, *_ in context),
                                "generation_attention": sum(ms for _, ms, *_ in generation)}
        for what, ours in (("mixed", mixed), ("decode", decode)):
            assert {"moe_dispatch", "moe", "moe_combine", "gate_ffn1_gemm"} <= set(ours)
            for name, ms in theirs[what].items():
                if ms or name in ours:
                    assert ours[name] == pytest.approx(ms, rel=1e-9), f"{what} {(c, g, i, o, p)} {name}"
            if backend == "sglang":
                assert set(ours) == {n for n, ms in theirs[what].items() if ms or n in ours}, what


def test_agg_answer_matches_aiconfigurator_cli_default(wheel_est, tmp_path):
    from tests.estimator.plan_oracle import assert_rows_equal, run_default

    ref, plan = run_default(QUESTION, tmp_path), agg_search(wheel_est, QUESTION)
    assert_rows_equal(plan.top, ref["top"], "best per configuration")
    assert_rows_equal(plan.pareto, ref["pareto"], "agg Pareto front")
    assert "tp2pp1dp4etp1ep8" in plan.top["parallel"].to_list()


def test_sglang_agg_answer_prices_pure_ep_layouts_through_deepep_as_the_reference(wheel_est, tmp_path):
    """DeepSeek-V3 8 x h200 sglang: 0.12.0's best agg layouts are DeepEP ones (tp1 dp8 ep8 first, then tp2 / tp4
    beside attention DP); before the DeepEP path our best was the fused tp1 dp8 etp8 at 180.804 tokens/s/GPU."""
    from tests.estimator.plan_oracle import assert_rows_equal, run_default

    ref, plan = run_default(SGLANG_QUESTION, tmp_path), agg_search(wheel_est, SGLANG_QUESTION)
    assert_rows_equal(plan.top, ref["top"], "best per configuration")
    assert_rows_equal(plan.pareto, ref["pareto"], "agg Pareto front")
    assert plan.top["parallel"][0] == "tp1pp1dp8etp1ep8"


def test_wide_ep_ops_refuse_empirical_sol_and_unknown_phases(wheel_est):
    """The wide-EP ops price measured rows only (0.12.0 has no EMPIRICAL / SOL answer for them); an unknown phase and an
    EP width without rows are typed refusals, never another table's answer."""
    import numpy as np

    from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError
    from perfledger.estimator.ops.base import Queries
    from perfledger.estimator.ops.registry import get_model

    base = {"system": SYSTEM, "backend": "sglang", "version": "0.5.14"}
    moe = {**base, "quant": "fp8_block", "distribution": "power_law_1.01", "gated": True, "topk": 8, "experts": 256,
           "hidden": 7168, "inter": 2048, "tp": 1, "ep": 8, "phase": "context"}
    tokens = Queries({"tokens": np.array([64, 5000])})
    op = get_model("wideep_moe")
    assert np.all(op.evaluate(wheel_est, moe, tokens, "hybrid").latency > 0)
    for mode in ("empirical", "sol"):
        with pytest.raises(EmpiricalUnavailableError, match="measured rows only"):
            op.evaluate(wheel_est, moe, tokens, mode)
    with pytest.raises(ValueError, match="phase 'prefill'"):
        op.evaluate(wheel_est, {**moe, "phase": "prefill"}, tokens, "silicon")
    with pytest.raises(NoDataError):
        op.evaluate(wheel_est, {**moe, "ep": 12}, tokens, "silicon")
    mla = {**base, "kv_quant": "fp8", "kernel": "flashinfer"}
    decode = Queries({"heads": np.array([128]), "batch": np.array([30]), "seq": np.array([4251])})
    gen = get_model("wideep_generation_mla")
    assert gen.evaluate(wheel_est, mla, decode, "silicon").latency[0] > 0
    with pytest.raises(NoDataError, match="kernel_source=triton"):
        gen.evaluate(wheel_est, {**mla, "kernel": "triton"}, decode, "silicon")
