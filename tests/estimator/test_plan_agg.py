"""The agg search against `aiconfigurator cli default` 0.12.0 (run here on each question, ~10-30 s): the best
configuration per worker parallelism (best first) and the agg Pareto front, point by point: same parallelism,
batch and context budget, and TTFT, TPOT, tokens/s/GPU, tokens/s/user (and the rest of the row) within 1e-4 of
its 3-decimal values."""

from __future__ import annotations

import json

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfledger.estimator.errors import UnsupportedModelError
from perfledger.estimator.plan.agg import agg_search, best_steps, ctx_budgets, rules, schedule
from perfledger.estimator.plan.pareto import pareto_front
from perfledger.estimator.plan.question import Question, QuestionError
from perfledger.estimator.plan.space import Parallel, ParallelWidthError, check_node_ep, enumerate_parallel

QUESTIONS = [
    pytest.param(Question("Qwen/Qwen3-32B", "h200_sxm", "vllm", 8, 4000, 500, 2000, 30), id="qwen3-32b-8xh200-vllm"),
    pytest.param(Question("Qwen/Qwen3-30B-A3B", "h200_sxm", "vllm", 8, 4000, 500, 2000, 30), id="qwen3-30b-a3b-8xh200-vllm"),
    pytest.param(Question("Qwen/Qwen3-32B", "h200_sxm", "trtllm", 8, 4000, 500, 2000, 30), id="qwen3-32b-8xh200-trtllm"),
    pytest.param(Question("meta-llama/Meta-Llama-3.1-8B", "h200_sxm", "vllm", 4, 1000, 200, 500, 15),
                 id="llama3.1-8b-4xh200-vllm"),
    # the knobs and the MoE backend: a cached prefix with MTP (nextn 1, 0.7 drafts accepted) on vLLM, and a MoE
    # model on sglang (attention DP with its reduce-scatter / all-gather dispatch)
    pytest.param(Question("Qwen/Qwen3-32B", "h200_sxm", "vllm", 8, 4000, 500, 2000, 30, prefix=1000, nextn=1,
                          nextn_accepted=0.7), id="qwen3-32b-prefix1000-mtp1-vllm"),
    pytest.param(Question("Qwen/Qwen3-30B-A3B", "h200_sxm", "sglang", 8, 4000, 500, 2000, 30),
                 id="qwen3-30b-a3b-8xh200-sglang"),
    # GDN layers in mixed steps (state kernels over the step's tokens) and Qwen3.5's attention-DP layouts
    pytest.param(Question("Qwen/Qwen3.5-35B-A3B", "h200_sxm", "vllm", 8, 4000, 500, 5000, 50),
                 id="qwen3.5-35b-a3b-8xh200-vllm"),
]


@pytest.mark.aic
@pytest.mark.parametrize("q", QUESTIONS)
def test_agg_search_matches_aiconfigurator_cli_default(wheel_est, q, tmp_path):
    from tests.estimator.plan_oracle import assert_rows_equal, run_default

    ref = run_default(q, tmp_path)
    plan = agg_search(wheel_est, q)
    assert_rows_equal(plan.top, ref["top"], "best per configuration")
    assert_rows_equal(plan.pareto, ref["pareto"], "agg Pareto front")
    assert plan.reason is None and plan.top.height >= 1
    steps = best_steps(plan)
    assert steps is not None and {"context_attention (scaled)", "generation_attention"} <= set(steps["mixed"])


@pytest.mark.aic
def test_deepseek_sglang_prices_the_data_fmha_and_its_pure_ep_layouts_through_deepep(wheel_est, tmp_path):
    """h200 sglang holds DeepSeek-V3's context MLA at bfloat16 FMHA only: the fp8 checkpoint's fused layouts are
    planned at bfloat16 (with a warning), as 0.12.0 plans them, their mixed steps pricing the granular MLA block at the
    step's tokens; its pure-EP layouts (moe_tp 1, ep 8) go through SGLang's DeepEP layer at the wide-EP MLA rows'
    fp8_block / fp8 (plan/large_ep.py). Both kinds are in the answer, every row and the front equal 0.12.0's."""
    from tests.estimator.plan_oracle import assert_rows_equal, run_default

    q = Question("deepseek-ai/DeepSeek-V3", "h200_sxm", "sglang", 8, 256, 256, 2_000_000, 50_000, version="0.5.14")
    ref, plan = run_default(q, tmp_path), agg_search(wheel_est, q)
    assert any("priced at bfloat16 FMHA" in w for w in plan.warnings)
    assert ref["top"].filter(pl.col("moe_tp") > 1).height >= 1 and ref["top"].filter(pl.col("moe_tp") == 1).height >= 1
    assert_rows_equal(plan.top, ref["top"], "DeepSeek-V3 sglang best per configuration")
    assert_rows_equal(plan.pareto, ref["pareto"], "DeepSeek-V3 sglang agg Pareto front")


@pytest.mark.aic
def test_sglang_sweeps_context_parallel_layouts_as_the_reference(wheel_est, tmp_path):
    """SGLang's context parallelism (cp 2 / 4 / 8 on tp1, models/context_parallel.py) on a dense model: 0.12.0's top 5
    holds tp1 cp2 (its mixed steps priced per rank, its decode at tp1), which we lacked before; every row and the front
    equal 0.12.0's."""
    from tests.estimator.plan_oracle import assert_rows_equal, run_default

    q = Question("Qwen/Qwen3-32B", "h200_sxm", "sglang", 8, 4000, 500, 2000, 30)
    ref, plan = run_default(q, tmp_path), agg_search(wheel_est, q)
    assert "tp1pp1dp1etp1ep1cp2" in plan.top["parallel"].to_list()
    assert_rows_equal(plan.top, ref["top"], "sglang best per configuration")
    assert_rows_equal(plan.pareto, ref["pareto"], "sglang agg Pareto front")


@pytest.mark.aic
@pytest.mark.parametrize("database_mode", ["silicon", "hybrid"])
def test_kimi_k3_plan_matches_aiconfigurator_cli_default(wheel_est, tmp_path, database_mode):
    """The MLA line (here Kimi-K3's KDA / MLA hybrid on 16 × h200, vLLM): attention DP and TP layouts, no cross-node
    EP. SILICON lists the tp16 configurations, as 0.12.0 does: KDA's 6-head shard, collected nowhere, reads the
    nearest collected count inside SILICON (labelled xshape, so the support matrix still grades that witness
    HYBRID_PASS). The best agg configs and the front equal 0.12.0's in both modes; disagg fits no 8-GPU worker here on
    either side."""
    from perfledger.estimator.plan.search import plan
    from tests.estimator.plan_oracle import assert_rows_equal, run_default

    q = Question("moonshotai/Kimi-K3", "h200_sxm", "vllm", 16, 4000, 500, 10000, 100, version="0.24.0",
                 database_mode=database_mode)
    ref = run_default(q, tmp_path, with_disagg=database_mode == "hybrid")
    found = agg_search(wheel_est, q, with_tiers=True)
    assert_rows_equal(found.top, ref["top"], "K3 best per configuration")
    assert_rows_equal(found.pareto, ref["pareto"], "K3 agg Pareto front")
    assert {p.split("etp")[0] for p in found.top["parallel"]} == {"tp4pp1dp4", "tp8pp1dp2", "tp16pp1dp1"}
    tiers = {row["parallel"].split("etp")[0]: found.tiers[(row["parallel"], row["batch"], row["ctx_tokens"])]
             for row in found.top.iter_rows(named=True)}
    assert "xshape" in tiers["tp16pp1dp1"] and "xshape" not in tiers["tp8pp1dp2"] | tiers["tp4pp1dp4"]
    if database_mode == "hybrid":
        disagg = plan(wheel_est, q, modes=("disagg",)).modes["disagg"]
        ref_disagg = [pl.read_csv(f) for f in tmp_path.glob("*/*/disagg/best_config_topn.csv")]
        assert not disagg.top and disagg.reason and not any(f.height for f in ref_disagg)


@pytest.mark.aic
def test_kimi_k3_on_blackwell_sglang_plans_its_experts_at_mxfp8_activations_as_the_reference(wheel_est, tmp_path):
    """0.12.0's planner prices Kimi-K3's mxfp4 experts on sglang Blackwell at w4a8_mxfp4_mxfp8 (checkpoint_quant.yaml
    `planner_moe_remap`); at the checkpoint's w4a16_mxfp4 the routed MoE was up to 2.5x slower and the best layout
    flipped to etp2 ep8 (227.3 vs 240.7 tokens/s/GPU). Best per configuration and the 55-point front equal 0.12.0's."""
    from tests.estimator.plan_oracle import assert_rows_equal, run_default

    q = Question("moonshotai/Kimi-K3", "b200_sxm", "sglang", 128, 256, 256, 2000000.0, 50000.0, version="0.5.14",
                 prefix=128)
    ref, found = run_default(q, tmp_path), agg_search(wheel_est, q)
    assert_rows_equal(found.top, ref["top"], "K3 b200 sglang best per configuration")
    assert_rows_equal(found.pareto, ref["pareto"], "K3 b200 sglang agg Pareto front")
    assert found.top["parallel"][0] == "tp8pp1dp2etp4ep4"


@pytest.mark.aic
def test_deepseek_v4_on_blackwell_sglang_plans_its_fp4_experts_and_attention_dp_as_the_reference(wheel_est, tmp_path):
    """DeepSeek-V4-Flash 4 x b200 sglang: exited 1 before (no w4a8_mxfp4_mxfp8 MoE slice in agg, every attention-DP
    prefill refused in disagg). Now the agg rows, the 85-point agg front and the disagg top rows equal 0.12.0's; its agg
    top 5 also holds a context-parallel layout (tp1 dp1 etp2 cp2), which we do not enumerate."""
    from perfledger.estimator.plan.search import plan
    from tests.estimator.plan_oracle import assert_rows_equal, run_default

    q = Question("deepseek-ai/DeepSeek-V4-Flash", "b200_sxm", "sglang", 4, 2000, 200, 2000.0, 40.0, version="0.5.14")
    ref, found = run_default(q, tmp_path, with_disagg=True), agg_search(wheel_est, q)
    ref_top = ref["top"].filter(~pl.col("parallel").str.contains("cp"))
    assert ref_top.height == ref["top"].height - 1
    assert_rows_equal(found.top.head(ref_top.height), ref_top, "DSV4 b200 sglang best per configuration")
    assert_rows_equal(found.pareto, ref["pareto"], "DSV4 b200 sglang agg Pareto front")
    (ref_disagg,) = [pl.read_csv(f) for f in tmp_path.glob("*/*/disagg/best_config_topn.csv")]
    ours = plan(wheel_est, q, modes=("disagg",)).modes["disagg"].top
    assert len(ours) == ref_disagg.height
    for column, theirs in (("tokens_per_s_per_gpu", "tokens/s/gpu"), ("tokens_per_s_per_user", "tokens/s/user")):
        assert [row[column] for row in ours] == pytest.approx(ref_disagg[theirs].to_list(), rel=1e-4)


@pytest.mark.aic
def test_nemotron_h_plan_prices_attention_dp_layouts_as_the_reference(wheel_est, tmp_path):
    """Nemotron-H under attention DP (refused before 2026-12-07, so 8 x h200 vLLM planned tp1 dp1 at 9,729.957
    tokens/s/GPU where 0.12.0 plans tp1 dp2 etp2 at 10,599.744): the agg rows and front equal 0.12.0's."""
    from tests.estimator.plan_oracle import assert_rows_equal, run_default

    q = Question("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "h200_sxm", "vllm", 4, 1000, 200, 1000.0, 20.0,
                 version="0.24.0")
    ref, found = run_default(q, tmp_path), agg_search(wheel_est, q)
    assert_rows_equal(found.top, ref["top"], "Nemotron-H best per configuration")
    assert_rows_equal(found.pareto, ref["pareto"], "Nemotron-H agg Pareto front")
    assert any("dp2" in p or "dp4" in p for p in found.top["parallel"])


@pytest.mark.aic
@pytest.mark.parametrize("system,backend,flag,want", [("b200_sxm", "sglang", None, "w4a8_mxfp4_mxfp8"),
                                                      ("gb200", "sglang", None, "w4a8_mxfp4_mxfp8"),
                                                      ("h200_sxm", "sglang", None, "w4a16_mxfp4"),
                                                      ("b200_sxm", "vllm", None, "w4a16_mxfp4"),
                                                      ("b200_sxm", "sglang", "w4a16_mxfp4", "w4a16_mxfp4")])
def test_planner_moe_lane_follows_gpu_generation_backend_and_flag(wheel_est, system, backend, flag, want):
    """The planner's K3 MoE lane: mxfp8 activations on sglang Blackwell only; Hopper, another backend or a flagged
    MoE quant keep their quant (the flag with source "flag")."""
    from perfledger.estimator.models.config import resolve_model
    from perfledger.estimator.plan.question import role_quants

    q = Question("moonshotai/Kimi-K3", system, backend, 16, 256, 256, 1e6, 1e6, version="0", moe_quant=flag)
    for context in (True, False):
        got = role_quants(wheel_est, resolve_model(q.model), q, context=context)["moe"]
        assert got == {"quant": want, "source": "flag" if flag else "checkpoint"}


@pytest.mark.aic
@pytest.mark.parametrize("model,system,backend,want", [
    ("deepseek-ai/DeepSeek-V4-Flash", "b200_sxm", "sglang", "w4a8_mxfp4_mxfp8_trtllm"),
    ("deepseek-ai/DeepSeek-V4-Pro", "gb200", "sglang", "w4a8_mxfp4_mxfp8_trtllm"),
    ("deepseek-ai/DeepSeek-V4-Flash", "b200_sxm", "trtllm", "w4a8_mxfp4_mxfp8"),
    ("nvidia/DeepSeek-V4-Flash-NVFP4", "b200_sxm", "sglang", "nvfp4"),
    ("sgl-project/DeepSeek-V4-Flash-FP8", "h200_sxm", "sglang", "fp8_block"),
    ("native-fp4-copy", "h200_sxm", "sglang", "w4a16_mxfp4_cutlass"),
    ("native-fp4-copy", "h200_sxm", "vllm", "w4a8_mxfp4_mxfp8")])
def test_planner_moe_lane_of_deepseek_v4_follows_its_experts_gpu_generation_and_backend(wheel_est, tmp_path, model,
                                                                                       system, backend, want):
    """DeepSeek-V4's native fp4 experts (checkpoint label w4a8_mxfp4_mxfp8) on sglang: the trtllm-gen lane on
    Blackwell, the cutlass w4a16 one on Hopper (an unnamed checkpoint: 0.12.0 refuses the released ones there);
    NVFP4 and FP8 checkpoints and other backends keep their label."""
    from perfledger.estimator.models.config import read_config, resolve_model
    from perfledger.estimator.plan.question import role_quants

    if model == "native-fp4-copy":  # the V4-Flash config under a path 0.12.0's refusal list does not name
        path = tmp_path / "config.json"
        path.write_text(json.dumps(resolve_model("deepseek-ai/DeepSeek-V4-Flash").config))
        config = read_config(path)
    else:
        config = resolve_model(model)
    q = Question(config.name, system, backend, 8, 256, 256, 1e6, 1e6, version="0")
    assert role_quants(wheel_est, config, q, context=False)["moe"] == {"quant": want, "source": "checkpoint"}


@pytest.mark.aic
def test_native_fp4_deepseek_v4_on_hopper_is_refused_naming_the_fp8_checkpoint(wheel_est):
    from perfledger.estimator.models.config import resolve_model
    from perfledger.estimator.plan.question import role_quants

    q = Question("deepseek-ai/DeepSeek-V4-Pro", "h200_sxm", "trtllm", 8, 256, 256, 1e6, 1e6, version="0",
                 moe_quant="fp8_block")
    with pytest.raises(UnsupportedModelError, match="native FP4 routed-expert.*use sgl-project/DeepSeek-V4-Pro-FP8"):
        role_quants(wheel_est, resolve_model(q.model), q, context=True)


@pytest.mark.aic
def test_agg_with_every_layout_refused_says_refused_not_does_not_fit(wheel_est, tmp_path):
    """An fp8_block MoE whose intermediate size no moe_tp splits into 128-wide weight blocks: every layout is refused
    by the plan (0.12.0 rejects each too); the reason names the refusal, where it used to say the model fits no GPU."""
    from perfledger.estimator.models.config import read_config, resolve_model

    path = tmp_path / "config.json"
    path.write_text(json.dumps({**resolve_model("Qwen/Qwen3-30B-A3B-FP8").config, "moe_intermediate_size": 100}))
    found = agg_search(wheel_est, Question(read_config(path), "h200_sxm", "vllm", 8, 1000, 200, 1000.0, 50.0,
                                           version="0.24.0"))
    assert found.top.is_empty()
    assert found.reason.startswith("refused: the estimator prices no agg layout (")
    assert "moe_intermediate_size 100 / moe_tp 1 = 100 is not a multiple of the fp8_block weight block 128" in found.reason


def test_search_space_is_the_reference_enumeration():
    dense = enumerate_parallel("agg", moe=False, backend="vllm", system="h200_sxm", total_gpus=8)
    assert [p.tp for p in dense] == [1, 2, 4, 8] and all(p.gpus == p.tp for p in dense)
    assert len(enumerate_parallel("agg", moe=False, backend="vllm", system="gb200", total_gpus=16)) == 5
    moe = enumerate_parallel("agg", moe=True, backend="vllm", system="h200_sxm", total_gpus=8)
    assert all(p.moe_tp * p.moe_ep == p.tp * p.dp and not (p.moe_tp > 1 and p.moe_ep > 1) for p in moe)
    assert Parallel(2, 1, 4, 1, 8) in moe and Parallel(2, 1, 2, 2, 2) not in moe
    trt = enumerate_parallel("agg", moe=True, backend="trtllm", system="h200_sxm", total_gpus=8)
    assert Parallel(1, 1, 4, 2, 2) in trt and not any(p.dp > 1 and p.tp > 1 for p in trt)
    with pytest.raises(ParallelWidthError, match="cross-node EP"):  # h200: 8 GPUs per node
        check_node_ep(Parallel(1, 1, 16, 1, 16), 8)
    check_node_ep(Parallel(4, 1, 4, 16, 1), 8)


def test_context_budgets_and_schedule():
    assert ctx_budgets(4000) == [4000, 8000]
    assert ctx_budgets(1000) == [1000 * i for i in range(1, 9)]
    assert ctx_budgets(300)[:4] == [300, 512, 600, 1024]  # stride max(isl, 512), plus isl and 2 isl
    vllm, trt = rules()["backends"]["vllm"], rules()["backends"]["trtllm"]
    s = schedule(vllm, 64, 4000, 4000, 500)
    assert (s.mix_steps, s.mix_gen, s.decode_steps, s.decode_requests, s.tpot_mix_steps) == (64, 63, 436, 64, 64)
    assert schedule(trt, 64, 4000, 4000, 500).tpot_mix_steps == 61
    assert schedule(vllm, 1, 4000, 4000, 500).decode_steps == 499


@pytest.mark.parametrize("kw", [dict(total_gpus=0), dict(isl=0), dict(prefix=4000), dict(ttft=0), dict(database_mode="sol")])
def test_bad_questions_are_refused(kw):
    base = dict(model="Qwen/Qwen3-32B", system="h200_sxm", backend="vllm", total_gpus=8, isl=4000, osl=500, ttft=2000,
                tpot=30)
    with pytest.raises(QuestionError):
        Question(**{**base, **kw})


@pytest.mark.aic
def test_no_fit_and_too_tight_name_the_reason(wheel_est):
    tight = agg_search(wheel_est, Question("Qwen/Qwen3-32B", "h200_sxm", "vllm", 8, 4000, 500, 2000, 2))
    assert tight.top.is_empty() and tight.reason.startswith("SLA too tight")
    big = agg_search(wheel_est, Question("Qwen/Qwen3-235B-A22B", "h200_sxm", "vllm", 1, 4000, 500, 2000, 30))
    assert big.top.is_empty() and big.reason.startswith("does not fit")


@pytest.mark.aic
def test_points_that_all_miss_data_name_missing_data_not_the_sla(tmp_path):
    """A tree with the wheel's GEMM and comm data but no attention table: every layout fits and every operating
    point misses, which is missing data (named), not "SLA too tight" (so the support matrix buckets it right)."""
    from perfledger import settings
    from perfledger.estimator.data.sources import TreeSource
    from perfledger.estimator.session import Estimator

    wheel = settings.aic_package_dir() / "systems" / "data" / "h200_sxm"
    for family in ("gemm", "comm"):
        (tmp_path / "h200_sxm" / family / "vllm").mkdir(parents=True)
        (tmp_path / "h200_sxm" / family / "vllm" / "0.24.0").symlink_to(wheel / family / "vllm" / "0.24.0")
    found = agg_search(Estimator(TreeSource(tmp_path)),
                       Question("Qwen/Qwen3-32B", "h200_sxm", "vllm", 8, 4000, 500, 2000, 30, version="0.24.0"))
    assert found.top.is_empty() and found.reason.startswith("missing data: no operating point could be priced")
    assert "attention" in found.reason and found.misses


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=40))
def test_pareto_front_keeps_exactly_the_undominated_points(points):
    frame = pl.DataFrame({"x": [float(x) for x, _ in points], "y": [float(y) for _, y in points]})
    front = pareto_front(frame, "x", "y")
    kept = set(front.select("x", "y").rows())
    assert front["x"].is_sorted() and front.height == len(kept)  # one row per distinct point
    for x, y in set(points):
        dominated = any(a >= x and b >= y and (a, b) != (x, y) for a, b in points)
        assert ((float(x), float(y)) in kept) == (not dominated)
