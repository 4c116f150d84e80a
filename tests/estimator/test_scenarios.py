"""Scenario files and the prediction regression gate (pure), scenario pricing on real data, the stored table."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from perfledger.estimator.scenarios import DEFAULT_SCENARIOS, SWEEP_TOKENS, ScenarioError, gate, load_scenarios, price_scenario

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


def test_the_default_scenarios_load() -> None:
    assert set(load_scenarios(DEFAULT_SCENARIOS)) >= {"kimi-k3", "deepseek-v3"}


@pytest.mark.parametrize(("text", "message"), [
    ("kimi-k3:\n  - {name: a, phase: warmup, tokens: 1, ops: [], deploy: {tp: 1}}\n",
     r"s.yaml: kimi-k3\[0\].phase: 'warmup'"),
    ("kimi-k3:\n  - {name: a, phase: decode, tokens: 1, ops: [{op: attention}], deploy: {tp: 1}}\n",
     r"kimi-k3\[0\].ops\[0\].op: 'attention'"),
    ("kimi-k3:\n  - {name: a}\n", r"missing key\(s\) \['deploy', 'ops', 'phase', 'tokens'\]"),
    ("kimi-k3:\n  - {name: a, kind: static, batch: 1, isl: 1, osl: 2}\n", r"kimi-k3\[0\]: missing key\(s\) \['deploy'\]"),
    ("kimi-k3:\n  - {name: a, kind: static, batch: 1, isl: 1, osl: 2, deploy: {moe_ep: 8}}\n",
     r"kimi-k3\[0\].deploy: name the parallelism"),
    ("kimi-k3:\n  - {name: a, kind: static, batch: 1, isl: 1, osl: 2, deploy: {tp: 8, moe_ep: 16}}\n",
     r"kimi-k3\[0\].deploy: MoE width moe_tp x moe_ep = 16 must equal tp 8"),
    ("kimi-k3:\n  - {name: a, kind: static, batch: 1, isl: 1, osl: 2, deploy: {tp: 0}}\n",
     r"kimi-k3\[0\].deploy.tp: 0 is not a positive integer"),
])
def test_scenario_file_errors_name_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    bad = tmp_path / "s.yaml"
    bad.write_text(text)
    with pytest.raises(ScenarioError, match=message):
        load_scenarios(bad)


def test_scenario_time_is_the_count_weighted_sum_of_operator_estimates(shared_tree: Path) -> None:
    from perfledger.estimator.batch import estimate_one
    from perfledger.estimator.data.sources import TreeSource
    from perfledger.estimator.session import Estimator

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
    from perfledger.estimator.data.sources import TreeSource
    from perfledger.estimator.scenarios import price_static
    from perfledger.estimator.session import Estimator

    est = Estimator(TreeSource(shared_tree))
    sc = {"name": "s", "kind": "static", "batch": 1, "isl": 512, "osl": 2}
    dense = price_static(est, "Qwen/Qwen3-32B", sc, ("h200_sxm", "vllm", "0.24.0"))
    assert dense["TTFT"]["ms"] > dense["TPOT"]["ms"] > 0
    k3 = price_static(est, "moonshotai/Kimi-K3", sc, ("h200_sxm", "vllm", "0.24.0"))
    # the reference prices this point at TTFT 811.7419 ms and TPOT 51.1767 ms (aiconfigurator-core 0.12.0)
    assert k3["TTFT"]["ms"] == pytest.approx(811.7419454227842, rel=1e-6)
    assert k3["TPOT"]["ms"] == pytest.approx(51.17665185726785, rel=1e-6)


def test_estimates_are_stored_and_gated_against_the_stored_version(tmp_path: Path, shared_tree: Path) -> None:
    from perfledger.estimator.scenarios import ESTIMATES_TABLE, ScenarioModel, refresh_estimates
    from perfledger.ledger.specs import find_spec
    from perfledger.warehouse.ingest import ingest
    from perfledger.warehouse.store import Warehouse

    wh = Warehouse(tmp_path / "wh")
    ingest([str(shared_tree / "h200_sxm" / "gemm" / "vllm" / "0.24.0")], wh)
    scenarios = tmp_path / "s.yaml"
    scenarios.write_text("kimi-k3:\n  - {name: decode, phase: decode, tokens: 64, deploy: {tp: 16, moe_ep: 16}, "
                         "ops: [{op: gemm, quant: bfloat16, n: hidden, k: 'heads * v_head_dim / tp', count: layers}]}\n")
    thresholds = {"warn_pct": 5.0, "fail_pct": 10.0}
    lanes = find_spec("kimi-k3")
    k3 = {"kimi-k3": ScenarioModel(lanes.model, tuple(lanes.systems))}

    first = refresh_estimates(wh.root, scenarios, k3, thresholds)
    assert first["version"] == 0 and first["gate"]["status"] == "no baseline"
    stored = wh.read_table(ESTIMATES_TABLE)
    priced = stored.filter(pl.col("kind") == "scenario").sort("seq")
    assert priced["ms"].to_list() == [r["ms"] for r in first["gate"]["rows"]] and priced.height >= 1
    assert set(priced["hf_model"]) == {"moonshotai/Kimi-K3"} and set(priced["verdict"]) == {"new"}
    assert json.loads(priced["priced_from"][0]) == {"batches": wh.table_version("batches"), "curated/gemm_perf": 0}
    sweep = stored.filter(pl.col("kind") == "sweep")
    assert sorted(set(sweep["tokens"])) == list(SWEEP_TOKENS) and sweep["ms"].null_count() == 0

    # A stored baseline 20% below today's numbers: the gate reads that version, it does not re-price the old data.
    baseline = wh.write_table(ESTIMATES_TABLE, stored.with_columns(pl.col("ms") * 0.8), mode="overwrite")
    second = refresh_estimates(wh.root, scenarios, k3, thresholds)
    assert second["version"] == baseline + 1 and second["gate"]["status"] == "fail"
    assert all(r["verdict"] == "fail" and r["delta_pct"] == pytest.approx(25.0) for r in second["gate"]["rows"])
    latest = wh.read_table(ESTIMATES_TABLE)
    assert set(latest["compared_with"]) == {baseline} and set(latest["previous_priced_at"]) == {priced["priced_at"][0]}
    assert wh.read_table(ESTIMATES_TABLE, as_of=baseline)["ms"].to_list() == pytest.approx(
        [ms * 0.8 for ms in stored["ms"]])


def test_operator_shapes_come_from_the_model_config_and_are_checked_against_it() -> None:
    from perfledger.estimator.scenarios import model_names, parallelism, parallelism_label, resolve_ops

    k3 = {**model_names("moonshotai/Kimi-K3"), **parallelism({"tp": 16, "moe_ep": 16})}
    sc = {"ops": [{"op": "gemm", "n": "hidden", "k": "heads * v_head_dim / tp", "count": "layers"}]}
    assert resolve_ops(sc, k3, "k3") == [{"op": "gemm", "n": 7168, "k": 768, "count": 93}]  # K3: 93 layers, hidden 7168
    assert parallelism_label(parallelism({"tp": 16, "moe_ep": 16})) == "tp16 · ep16"
    assert parallelism({"tp": 16, "moe_ep": 16})["gpus"] == 16
    with pytest.raises(ScenarioError, match=r"k3.ops\[0\].count: 200 exceeds the model's 93 layers"):
        resolve_ops({"ops": [{"op": "gemm", "n": 1, "k": 1, "count": 200}]}, k3, "k3")
    with pytest.raises(ScenarioError, match=r"k3.ops\[0\].k: 'heads / 5' = 19.2 is not a positive whole number"):
        resolve_ops({"ops": [{"op": "gemm", "n": 1, "k": "heads / 5"}]}, k3, "k3")
    with pytest.raises(ScenarioError, match=r"k3.ops\[0\].n: unknown name 'hiden'"):
        resolve_ops({"ops": [{"op": "gemm", "n": "hiden", "k": 1}]}, k3, "k3")


def test_every_row_says_whether_its_deployment_fits() -> None:
    from perfledger.estimator.scenarios import memory_fit

    sc = {"kind": "static", "batch": 1, "isl": 1024, "osl": 128}
    wide = memory_fit("moonshotai/Kimi-K3", ("h200_sxm", "vllm", "0.24.0"), {**sc, "deploy": {"tp": 16, "moe_ep": 16}})
    assert wide["fit"] == "fits" and wide["memory_gib"] < wide["capacity_gib"] == 141.0
    one_node = memory_fit("moonshotai/Kimi-K3", ("h200_sxm", "vllm", "0.24.0"), {**sc, "deploy": {"tp": 8, "moe_ep": 8}})
    assert one_node["fit"] == "does not fit" and one_node["memory_gib"] > 141.0
    l40s = memory_fit("moonshotai/Kimi-K3", ("l40s", "vllm", "0.24.0"), {**sc, "deploy": {"tp": 16, "moe_ep": 16}})
    assert l40s["fit"] == "does not fit"  # the matrix's HW_INCOMPATIBLE: 48 GB cards cannot hold K3


def test_the_shipped_scenarios_resolve_against_their_models_configs() -> None:
    from perfledger.estimator.scenarios import model_names, parallelism, resolve_ops
    from perfledger.ledger.specs import find_spec

    for model, items in load_scenarios(DEFAULT_SCENARIOS).items():
        names = model_names(find_spec(model).model)
        for i, sc in enumerate(items):
            if sc.get("kind") != "static":
                assert resolve_ops(sc, {**names, **parallelism(sc["deploy"])}, f"{model}[{i}]")
