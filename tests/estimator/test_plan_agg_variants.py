"""The agg search against `aiconfigurator cli default` 0.12.0 on the knobs and the MoE backend the main parity file
does not run: a cached prefix with MTP (nextn 1, 0.7 drafts accepted) on vLLM, and a MoE model on sglang (attention
DP with its reduce-scatter / all-gather dispatch). Same assertions as test_plan_agg.py."""

from __future__ import annotations

import pytest

from perfledger.estimator.plan.agg import agg_search
from perfledger.estimator.plan.question import Question

pytestmark = pytest.mark.aic
QUESTIONS = [
    pytest.param(Question("Qwen/Qwen3-32B", "h200_sxm", "vllm", 8, 4000, 500, 2000, 30, prefix=1000, nextn=1,
                          nextn_accepted=0.7), id="qwen3-32b-prefix1000-mtp1-vllm"),
    pytest.param(Question("Qwen/Qwen3-30B-A3B", "h200_sxm", "sglang", 8, 4000, 500, 2000, 30),
                 id="qwen3-30b-a3b-8xh200-sglang"),
]


@pytest.mark.parametrize("q", QUESTIONS)
def test_agg_search_variants_match_aiconfigurator_cli_default(wheel_est, q, tmp_path):
    from tests.estimator.plan_oracle import assert_rows_equal, run_default

    ref = run_default(q, tmp_path)
    plan = agg_search(wheel_est, q)
    assert_rows_equal(plan.top, ref["top"], "best per configuration")
    assert_rows_equal(plan.pareto, ref["pareto"], "agg Pareto front")
