"""The pipeline's planning questions and the `plans` table's pure parts: question ids, config checks, the change note
and the plans gate (the stage itself runs in tests/flows/test_pipeline.py, the page in tests/reports/test_pages.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from perfledger.estimator.plan.asked import Asked, PlanConfigError, expand
from perfledger.estimator.plans import CLUSTER, change_text, gate_plans, plan_rows

QWEN = {"model": "Qwen/Qwen3-32B", "systems": ["h200_sxm", "b200_sxm"], "total_gpus": [4, 8], "backend": "vllm",
        "isl": 4000, "osl": 500, "ttft": 2000, "tpot": 30}


def _hf(name: str) -> str:
    if name == "nope":
        raise ValueError("no such model")
    return {"kimi-k3": "moonshotai/Kimi-K3"}.get(name, name)


def test_an_entry_expands_per_system_and_budget_with_ids_stable_over_order_and_name() -> None:
    asked = expand([QWEN], _hf)
    budgets = [(a.question.system, a.question.total_gpus) for a in asked]
    assert budgets == [("h200_sxm", 4), ("h200_sxm", 8), ("b200_sxm", 4), ("b200_sxm", 8)]
    assert len({a.id for a in asked}) == 4
    reordered = expand([{**QWEN, "systems": ["b200_sxm", "h200_sxm"], "total_gpus": [8, 4]}], _hf)
    assert {a.id for a in reordered} == {a.id for a in asked}
    # the id follows the HF id, not the configured spelling: a lane name and its HF id are one question
    k3 = {**QWEN, "systems": "h200_sxm", "total_gpus": 16}
    assert expand([{**k3, "model": "kimi-k3"}], _hf)[0].id == expand([{**k3, "model": "moonshotai/Kimi-K3"}], _hf)[0].id
    # every answer-changing field changes the id
    base = asked[1]
    for change in ({"tpot": 31.0}, {"isl": 4001}, {"version": "0.24.0"}, {"prefix": 10}, {"database_mode": "hybrid"}):
        assert replace(base, question=replace(base.question, **change)).id != base.id, change
    assert replace(base, mode="agg").id != base.id and replace(base, top_n=3).id != base.id
    again = Asked.from_json(json.loads(json.dumps(base.to_json())))  # as the flow's parameters carry it
    assert again == base and again.id == base.id and again.question.total_gpus == 8 and base.modes == ("agg", "disagg")


@pytest.mark.parametrize(("entry", "message"), [
    ({**QWEN, "tpot_ms": 30}, r"plans\[0\]: unknown key\(s\) \['tpot_ms'\]"),
    ({k: v for k, v in QWEN.items() if k != "isl"}, r"plans\[0\]: missing key\(s\) \['isl'\]"),
    ({**QWEN, "total_gpus": [8, 0]}, r"plans\[0\].total_gpus: \[8, 0\] must be a positive integer"),
    ({**QWEN, "ttft": -1}, r"plans\[0\].ttft: -1 must be a positive number"),
    ({**QWEN, "mode": "both"}, r"plans\[0\].mode: 'both' is not one of agg, disagg, all"),
    ({**QWEN, "model": "nope"}, r"plans\[0\].model: no such model"),
    ({**QWEN, "prefix": 4000}, r"plans\[0\].prefix: 4000 must be a whole number in \[0, isl\)"),
])
def test_a_bad_entry_names_its_key(entry: dict, message: str) -> None:
    with pytest.raises(PlanConfigError, match=message):
        expand([entry], _hf)


def test_the_same_question_twice_is_refused() -> None:
    with pytest.raises(PlanConfigError, match=r"plans\[1\]: asks Qwen/Qwen3-32B on 4 × h200_sxm"):
        expand([QWEN, {**QWEN, "systems": ["h200_sxm"]}], _hf)


def _best(qid: str, tps: float | None, layout: str = "tp4 b64", mode: str | None = "agg", replicas: int = 2) -> dict:
    if tps is None:
        return {"question_id": qid, CLUSTER: None, "mode": None, "layout": None, "text": "agg: too tight"}
    return {"question_id": qid, CLUSTER: tps, "mode": mode, "layout": layout, "replicas": replicas}


def test_the_plans_gate_blocks_a_drop_and_a_lost_answer_never_a_gain() -> None:
    previous = [_best("a", 100.0), _best("b", 100.0), _best("c", 100.0), _best("d", 100.0), _best("e", None)]
    current = [_best("a", 96.0), _best("b", 93.0), _best("c", 150.0), _best("d", None), _best("e", None), _best("f", 10.0)]
    g = gate_plans(current, previous, warn_pct=5, fail_pct=10)
    assert [r["verdict"] for r in g["rows"]] == ["ok", "warn", "ok", "lost", "refused", "new"]
    assert g["status"] == "fail" and g["counts"]["lost"] == 1
    assert g["rows"][1]["delta_pct"] == pytest.approx(-7.0) and g["rows"][1]["previous_tokens_per_s_per_gpu"] == 100.0
    assert gate_plans([_best("a", 80.0)], previous, 5, 10)["status"] == "fail"
    assert gate_plans([_best("a", 95.5)], previous, 5, 10)["status"] == "pass"
    assert gate_plans(current, None, 5, 10)["status"] == "no baseline"


def test_the_change_note_says_what_moved_by_how_much_and_after_which_batch() -> None:
    label = "Qwen/Qwen3-32B on 8 × h200_sxm (vllm current)"
    before, moved = _best("a", 500.0), _best("a", 535.0, layout="tp2 b32", replicas=4)
    assert change_text(label, before, moved, ["B7"]) == (
        f"best config for {label} moved from agg tp4 b64 × 2 to agg tp2 b32 × 4, +7.0 % tokens/s/GPU, after batch B7")
    assert change_text(label, before, _best("a", 450.0), ["B7", "B8"]).endswith("stays agg tp4 b64 × 2, -10.0 % "
                                                                                "tokens/s/GPU, after batches B7, B8")
    assert change_text(label, before, _best("a", 500.0), []) == f"best config for {label} unchanged: agg tp4 b64 × 2"
    assert change_text(label, None, moved, []) == f"first plan of {label}: agg tp2 b32 × 4"
    assert "refused (agg: too tight)" in change_text(label, None, _best("a", None), [])
    assert change_text(label, _best("a", None), moved, ["B9"]).startswith(f"{label}: now answered: agg tp2 b32 × 4, 535.0")
    lost = f"{label}: no longer answered (was agg tp4 b64 × 2): agg: too tight"
    assert change_text(label, before, _best("a", None), []) == lost
    refused = _best("a", None)
    assert change_text(label, refused, refused, ["B9"]).endswith("still refused (agg: too tight), after batch B9")


def test_rows_of_a_refused_question_keep_every_reason() -> None:
    asked = expand([{**QWEN, "systems": "h200_sxm", "total_gpus": 16}], _hf)[0]
    payload = {"question": {"version": "0.24.0"}, "best": None, "agg": [], "disagg": [], "agg_pareto": [],
               "disagg_pareto": [], "warnings": ["w1"], "reasons": {"agg": "unsupported: x", "disagg": "does not fit: y"}}
    rows = plan_rows(asked, payload)
    assert [r["kind"] for r in rows] == ["best", "refusal", "refusal", "warning"]
    assert rows[0]["text"] == "agg: unsupported: x; disagg: does not fit: y" and rows[0].get("mode") is None
    assert all(r["question_id"] == asked.id and r["version"] == "0.24.0" and r["version_asked"] is None for r in rows)
