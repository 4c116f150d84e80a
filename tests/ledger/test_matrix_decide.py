"""The matrix status decision over deployment-search answers (ledger/matrix/decide.py; pure, no data)."""

import polars as pl
import pytest

from perfledger.estimator.plan.feasible import KINDS, Feasibility
from perfledger.ledger.matrix.build import search_rows
from perfledger.ledger.matrix.decide import KIND_LABELS, decide, needs_hybrid, weakest
from perfledger.ledger.matrix.rules import load_rules
from perfledger.ledger.specs import find_spec

ORDER = load_rules().source_tiers


def found(*tiers, mode="agg"):
    return Feasibility(mode, True, frozenset(tiers), "tp8pp1dp1etp1ep8 b1")


def missed(kind, reason="x", mode="agg"):
    return Feasibility(mode, False, kind=kind, reason=reason)


def test_silicon_witness_is_a_pass_and_hybrid_is_not_asked():
    assert decide(found("silicon"), None, ORDER) == ("PASS", "", "silicon")
    assert not needs_hybrid(found("silicon"))


def test_a_roofline_op_inside_silicon_is_at_best_hybrid_pass():
    assert decide(found("silicon", "sol"), None, ORDER) == ("HYBRID_PASS", "", "sol")


def test_a_kda_kernel_read_off_another_head_count_inside_silicon_is_at_best_hybrid_pass():
    """kda_kernel reads an uncollected head count's nearest collected one inside SILICON (as 0.12.0), tier xshape."""
    assert decide(found("silicon", "xshape"), None, ORDER) == ("HYBRID_PASS", "", "xshape")


def test_only_hybrid_finds_one_the_weakest_tier_is_the_source():
    status = decide(missed("missing_data"), found("silicon", "xshape", "xquant"), ORDER)
    assert status == ("HYBRID_PASS", "", weakest({"xshape", "xquant"}, ORDER)) == ("HYBRID_PASS", "", "xquant")


@pytest.mark.parametrize("kind", KINDS)
def test_fail_names_the_kind_and_the_silicon_reason(kind):
    silicon = missed(kind, "no gemm_perf rows for h200_sxm/vllm/0.1 in the warehouse", mode="disagg")
    status, err, source = decide(silicon, missed(kind, "hybrid says something else", mode="disagg"), ORDER)
    assert (status, source) == ("FAIL", "")
    assert err == f"disagg search: {KIND_LABELS[kind]}: no gemm_perf rows for h200_sxm/vllm/0.1 in the warehouse"


def test_hybrid_is_asked_only_where_data_could_change_the_answer():
    assert needs_hybrid(missed("missing_data")) and needs_hybrid(missed("too_tight"))
    assert not needs_hybrid(missed("refused")) and not needs_hybrid(missed("unfit"))


def test_a_reason_already_prefixed_is_not_repeated():
    _, err, _ = decide(missed("unfit", "does not fit: no configuration holds the model in GPU memory"), None, ORDER)
    assert err == "agg search: does not fit: no configuration holds the model in GPU memory"


def test_search_rows_asks_silicon_then_hybrid_and_hardware_first():
    spec = find_spec("qwen3-235b-a22b")
    asked = []
    answers = {("h200_sxm", "agg"): (missed("missing_data"), found("xshape")),
               ("h200_sxm", "disagg"): (found("silicon", mode="disagg"), None),
               ("b200_sxm", "agg"): (missed("refused", "no agg step model"), None),
               ("b200_sxm", "disagg"): (missed("too_tight", mode="disagg"), missed("too_tight", mode="disagg"))}

    def outcome(cell, mode, database_mode):
        asked.append((cell[0], mode, database_mode))
        silicon, hybrid = answers[(cell[0], mode)]
        return silicon if database_mode == "silicon" else hybrid

    flops = {"h200_sxm": {"fp8": 1.0, "bf16": 1.0}, "b200_sxm": {"fp8": 1.0, "bf16": 1.0, "fp4": 1.0}}
    rows = search_rows(spec, [("h200_sxm", "vllm", "0.24.0"), ("b200_sxm", "vllm", "0.24.0")], outcome, flops)
    got = rows.select("System", "Mode", "Status", "Source").rows()
    assert got == [("h200_sxm", "agg", "HYBRID_PASS", "xshape"), ("h200_sxm", "disagg", "PASS", "silicon"),
                   ("b200_sxm", "agg", "FAIL", ""), ("b200_sxm", "disagg", "FAIL", "")]
    assert ("b200_sxm", "agg", "hybrid") not in asked and ("b200_sxm", "disagg", "hybrid") in asked
    commands = rows["Command"].to_list()
    assert "--database-mode hybrid" in commands[0] and "--database-mode silicon" in commands[1]
    assert all("--total-gpus 128" in c and "--mode" in c for c in commands)
    assert rows.filter(pl.col("Status") == "FAIL")["ErrMsg"].to_list()[0] == "agg search: search refused: no agg step model"
