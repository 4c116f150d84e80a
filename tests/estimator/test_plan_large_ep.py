"""The planner's MoE all-to-all switch (plan/large_ep.py) against 0.12.0: which DeepSeek-V3 layouts on 8 x h200 vLLM it
prices through DeepEP, every op of their mixed and decode steps against 0.12.0's planner-built model, and the agg
answer of `aiconfigurator cli default` (top rows and Pareto front, the switched tp2/dp4/ep8 row among them)."""

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
QUESTION = Question(MODEL, SYSTEM, "vllm", 8, 4000, 500, 5000, 50, version="0.24.0")
DEEPEP = (("context", "deepep_ht"), ("generation", "deepep_ll"))


def _deploy(model: str, backend: str = "vllm", version: str = "0.24.0", **parallel) -> tuple:
    m = load_model(model)
    quants = resolve_quants(resolve_model(model), backend, {"gemm": None, "moe": None, "kv": None, "fmha": None})
    return m, Deploy(SYSTEM, backend, version, **parallel, **{f"{q}_quant": v["quant"] for q, v in quants.items()})


@pytest.mark.parametrize("parallel,expected", [
    (dict(tp=2, attention_dp=4, moe_ep=8), DEEPEP),
    (dict(tp=1, attention_dp=8, moe_ep=8), DEEPEP),
    (dict(tp=8, moe_ep=8), DEEPEP),
    (dict(tp=2, attention_dp=4, moe_tp=8), ()),  # moe_tp > 1 stays fused
    (dict(tp=2, attention_dp=2, moe_ep=4), ()),  # no rows at ep 4
])
def test_switch_follows_the_data(wheel_est, parallel, expected):
    m, d = _deploy(MODEL, **parallel)
    assert switched(wheel_est, m, d, PHASES).moe_a2a == expected


def test_unmarked_family_stays_fused(wheel_est):
    m, d = _deploy("Qwen/Qwen3-30B-A3B", tp=2, attention_dp=4, moe_ep=8)
    assert switched(wheel_est, m, d, PHASES).moe_a2a == ()


@pytest.mark.parametrize("tp,dp", [(2, 4), (8, 1)])
def test_switched_steps_match_the_planner_model_per_op(wheel_est, tp, dp):
    import logging

    import aiconfigurator_core
    from aiconfigurator.cli.main import build_default_tasks
    from aiconfigurator_core.sdk import engine
    from aiconfigurator_core.sdk.models import get_model

    logging.disable(logging.WARNING)
    try:
        q = QUESTION
        task = next(t for t in build_default_tasks(model_path=MODEL, total_gpus=8, system=SYSTEM, backend="vllm",
                                                   backend_version="0.24.0", isl=q.isl, osl=q.osl, ttft=q.ttft,
                                                   tpot=q.tpot).values() if t.serving_mode == "agg")
        config = task.build_model_config(role="agg", parallel=(tp, 1, dp, 1, 8, 1))
        assert config.moe_comm_backend == dict(DEEPEP)
        spec = engine.build_engine_spec_json(get_model(MODEL, config, "vllm"), model_path=MODEL, system=SYSTEM,
                                             backend="vllm", backend_version="0.24.0", nextn=0, kv_block_size=None,
                                             systems_path=None, database=task._load_database(SYSTEM, "vllm", "0.24.0"))
        ref = engine.EngineHandle(bytes(aiconfigurator_core.engine_spec_bincode_from_json(spec)))
    finally:
        logging.disable(logging.NOTSET)
    m, d = _deploy(MODEL, tp=tp, attention_dp=dp, moe_ep=8)
    d = switched(wheel_est, m, d, PHASES)
    shapes = [(4000, 7, 4000, 500), (8000, 30, 4000, 500)]
    lists = [mixed_step(m, d, ctx_tokens=c, gen_requests=g, isl=i, osl=o) for c, g, i, o in shapes]
    lists += [decode_step(m, d, gen_requests=g, isl=i, osl=o) for _, g, i, o in shapes]
    priced = price_many(wheel_est, lists, wheel_est.spec(SYSTEM))
    for (c, g, i, o), mixed, decode in zip(shapes, priced, priced[len(shapes):], strict=False):
        shared, _, _ = ref.mixed_step_breakdown_per_op(c, g, i, o, 0, 1.0, 1.0)
        theirs = {"mixed": {n.removeprefix("context_"): ms for n, ms, *_ in shared},
                  "decode": {n.removeprefix("generation_"): ms for n, ms, *_ in ref.decode_step_per_op(g, i, o, 1.0)}}
        for what, ours in (("mixed", mixed), ("decode", decode)):
            assert {"moe_dispatch", "moe", "moe_combine", "gate_ffn1_gemm"} <= set(ours)
            for name, ms in theirs[what].items():
                if ms or name in ours:
                    assert ours[name] == pytest.approx(ms, rel=1e-9), f"{what} {(c, g, i, o)} {name}"


def test_agg_answer_matches_aiconfigurator_cli_default(wheel_est, tmp_path):
    from tests.estimator.plan_oracle import assert_rows_equal, run_default

    ref, plan = run_default(QUESTION, tmp_path), agg_search(wheel_est, QUESTION)
    assert_rows_equal(plan.top, ref["top"], "best per configuration")
    assert_rows_equal(plan.pareto, ref["pareto"], "agg Pareto front")
    assert "tp2pp1dp4etp1ep8" in plan.top["parallel"].to_list()
