"""Scenario files and the prediction regression gate (pure), plus scenario pricing on real data."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfledger.flows.config import DEFAULT_SCENARIOS
from perfledger.reports.estimates import ScenarioError, gate, load_scenarios, price_scenario

ROW = {"model": "m", "scenario": "s", "metric": "TTFT", "system": "h200_sxm", "backend": "vllm", "version": "1"}


def _row(ms, **kw):
    return {**ROW, **kw, "ms": ms, "source": "silicon", "error": None}


def test_gate_verdicts_and_status() -> None:
    previous = [_row(10.0), _row(10.0, version="2"), _row(10.0, version="3"), _row(10.0, version="4")]
    current = [_row(10.4), _row(10.8, version="2"), _row(8.0, version="3"), _row(None, version="4"), _row(5.0, version="5")]
    result = gate(current, previous, warn_pct=5, fail_pct=10)
    assert [r["verdict"] for r in result["rows"]] == ["ok", "warn", "fail", "lost", "new"]
    assert result["rows"][2]["delta_pct"] == pytest.approx(-20.0)
    assert result["status"] == "fail"
    assert gate(current[:2], previous, 5, 10)["status"] == "pass"
    assert gate(current, None, 5, 10)["status"] == "no baseline"


def test_scenario_file_errors_name_file_and_key(tmp_path: Path) -> None:
    assert set(load_scenarios(DEFAULT_SCENARIOS)) >= {"kimi-k3", "deepseek-v3"}
    bad = tmp_path / "s.yaml"
    bad.write_text("kimi-k3:\n  - {name: a, phase: warmup, tokens: 1, ops: []}\n")
    with pytest.raises(ScenarioError, match=r"s.yaml: kimi-k3\[0\].phase: 'warmup'"):
        load_scenarios(bad)
    bad.write_text("kimi-k3:\n  - {name: a, phase: decode, tokens: 1, ops: [{op: attention}]}\n")
    with pytest.raises(ScenarioError, match=r"kimi-k3\[0\].ops\[0\].op: 'attention'"):
        load_scenarios(bad)
    bad.write_text("kimi-k3:\n  - {name: a}\n")
    with pytest.raises(ScenarioError, match=r"missing key\(s\) \['ops', 'phase', 'tokens'\]"):
        load_scenarios(bad)


def test_scenario_time_is_the_count_weighted_sum_of_operator_estimates(shared_tree: Path) -> None:
    from perfledger.estimator.batch import estimate_one
    from perfledger.estimator.session import Estimator
    from perfledger.estimator.data.sources import TreeSource

    est = Estimator(TreeSource(shared_tree))
    cell = ("h200_sxm", "vllm", "0.24.0")
    ops = [{"op": "gemm", "quant": "bfloat16", "n": 4608, "k": 3584, "count": 3},
           {"op": "gemm", "quant": "bfloat16", "n": 3584, "k": 4096, "count": 2}]
    priced = price_scenario(est, {"name": "x", "phase": "prefill", "tokens": 512, "ops": ops}, cell)
    single = [estimate_one(est, "gemm", mode="hybrid", system=cell[0], backend=cell[1], version=cell[2], quant="bfloat16",
                           m=512, n=o["n"], k=o["k"])["latency_ms"] for o in ops]
    assert priced["ms"] == pytest.approx(3 * single[0] + 2 * single[1]) and priced["source"] == "silicon"
    miss = price_scenario(est, {"name": "x", "phase": "prefill", "tokens": 512, "ops": ops}, ("gb300", "trtllm", "1.0.0"))
    assert miss["ms"] is None and miss["error"].startswith("gemm: no gemm_perf rows for gb300/trtllm/1.0.0")


def test_static_scenarios_give_ttft_and_tpot_or_a_named_miss(shared_tree: Path) -> None:
    from perfledger.estimator.session import Estimator
    from perfledger.estimator.data.sources import TreeSource

    from perfledger.reports.estimates import price_static

    est = Estimator(TreeSource(shared_tree))
    sc = {"name": "s", "kind": "static", "batch": 1, "isl": 512, "osl": 2}
    dense = price_static(est, "Qwen/Qwen3-32B", sc, ("h200_sxm", "vllm", "0.24.0"))
    assert dense["TTFT"]["ms"] > dense["TPOT"]["ms"] > 0
    k3 = price_static(est, "moonshotai/Kimi-K3", sc, ("h200_sxm", "vllm", "0.24.0"))
    # the reference prices this point at TTFT 811.7419 ms and TPOT 51.1767 ms (aiconfigurator-core 0.12.0)
    assert k3["TTFT"]["ms"] == pytest.approx(811.7419454227842, rel=1e-6)
    assert k3["TPOT"]["ms"] == pytest.approx(51.17665185726785, rel=1e-6)
