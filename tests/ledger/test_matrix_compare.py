"""Matrix compare (real states and the transition rules) and the per-model matrix block."""

import polars as pl
import pytest

from perfledger.console import EXIT_BLOCKING
from perfledger.ledger.matrix.compare import EXIT_CHANGED, EXIT_SAME, compare_matrices
from perfledger.ledger.matrix.reader import read_matrix
from perfledger.ledger.matrix.summary import count_model, model_block, summarize
from tests.ledger.curated import MATRIX_STATES, wheel_systems

pytestmark = pytest.mark.xdist_group("ledger-test_matrix_compare")


@pytest.fixture(scope="module")
def states():
    return {name: read_matrix(MATRIX_STATES / name) for name in ("k3-merge-a77804e", "head-095f58a")}


def test_k3_merge_to_head(states):
    diff = compare_matrices(states["k3-merge-a77804e"], states["head-095f58a"])
    assert (len(diff.added), len(diff.removed), len(diff.changed)) == (3400, 2024, 0)
    assert 13032 + 3400 - 2024 == 14408
    assert diff.metadata and diff.exit_code == EXIT_CHANGED


def test_same_state_is_exit_0(states):
    assert compare_matrices(states["head-095f58a"], states["head-095f58a"]).exit_code == EXIT_SAME


def test_wheel_to_head_has_blocking_transitions(states):
    diff = compare_matrices(read_matrix(wheel_systems() / "support_matrix"), states["head-095f58a"])
    assert diff.exit_code == EXIT_BLOCKING
    assert {b["category"] for b in diff.blocking} <= {"silicon_regression", "hybrid_regression", "incompatibility_to_failure"}
    assert sum(diff.transitions.values()) == len(diff.changed)


def frame(status: str, source: str = "", command: str = "c") -> pl.DataFrame:
    return pl.DataFrame({"HuggingFaceID": ["m"], "Architecture": ["A"], "System": ["b200_sxm"], "Backend": ["vllm"],
                         "Version": ["0.24.0"], "Mode": ["agg"], "Status": [status], "ErrMsg": [""],
                         "Command": [command], "Source": [source]})


@pytest.mark.parametrize(("old", "new", "category", "code"), [
    ("PASS", "HYBRID_PASS", "silicon_regression", EXIT_BLOCKING),
    ("PASS", "FAIL", "silicon_regression", EXIT_BLOCKING),
    ("HYBRID_PASS", "FAIL", "hybrid_regression", EXIT_BLOCKING),
    ("HYBRID_PASS", "HW_INCOMPATIBLE", "hybrid_regression", EXIT_BLOCKING),
    ("HW_INCOMPATIBLE", "FAIL", "incompatibility_to_failure", EXIT_BLOCKING),
    ("FRAMEWORK_INCOMPATIBLE", "FAIL", "incompatibility_to_failure", EXIT_BLOCKING),
    ("FAIL", "PASS", "silicon_fix", EXIT_CHANGED),
    ("FAIL", "HYBRID_PASS", "new_hybrid_coverage", EXIT_CHANGED),
    ("FAIL", "HW_INCOMPATIBLE", "reclassified_hw", EXIT_CHANGED),
    ("HW_INCOMPATIBLE", "FRAMEWORK_INCOMPATIBLE", "other", EXIT_CHANGED),
])
def test_transition_rules(old, new, category, code):
    diff = compare_matrices(frame(old), frame(new))
    assert diff.categories == {category: 1}
    assert diff.exit_code == code


def test_different_gpu_budgets_are_never_blocking():
    """The reference checks under `--total-gpus 128`, our built matrix one 8-GPU replica: a PASS -> FAIL
    between them is listed as budget_differs, not blocking; under one budget it stays blocking."""
    from perfledger.ledger.matrix.store import BUILT_SOURCE

    imported = frame("PASS", command="aiconfigurator cli default --total-gpus 128 --system b200_sxm")
    built = frame("FAIL", command=None).with_columns(snapshot_source=pl.lit(BUILT_SOURCE))
    diff = compare_matrices(imported, built)
    assert diff.budgets == {"old": [128], "new": [8]} and not diff.blocking
    assert diff.categories == {"budget_differs": 1} and diff.budget_differs[0]["gpus"] == [128, 8]
    assert diff.exit_code == EXIT_CHANGED and diff.as_json("a", "b")["budget_differs"] == 1
    same = compare_matrices(imported, frame("FAIL", command="... --total-gpus 128 ..."))
    assert same.exit_code == EXIT_BLOCKING and same.budgets == {"old": [128], "new": [128]}
    unknown = compare_matrices(frame("PASS", command="c"), frame("FAIL", command="c"))  # no budget named: as before
    assert unknown.exit_code == EXIT_BLOCKING and unknown.budgets == {"old": [None], "new": [None]}


def test_the_imported_head_matrix_names_a_budget_per_row(states):
    """Every head row names its `--total-gpus` (4, 32 or 128 by model); Kimi-K3's are 128."""
    from perfledger.ledger.matrix.compare import with_gpu_budget
    from perfledger.ledger.matrix.rules import load_rules

    rows = with_gpu_budget(states["head-095f58a"], load_rules())
    assert rows["gpus"].null_count() == 0 and set(rows["gpus"].unique()) == {4, 32, 128}
    assert set(rows.filter(pl.col("HuggingFaceID") == "moonshotai/Kimi-K3")["gpus"]) == {128}


def test_metadata_only_change():
    diff = compare_matrices(frame("PASS", "silicon", "a"), frame("PASS", "silicon", "b"))
    assert diff.metadata[0]["fields"] == ["Command"] and diff.exit_code == EXIT_CHANGED


def test_summaries(states):
    head = states["head-095f58a"]
    s = summarize(head, "head")
    assert s["rows"] == 14408 and s["models"]["moonshotai/Kimi-K3"] == 236 and len(s["models"]) == 71
    assert count_model(head, "moonshotai/Kimi-K3")["by_status"]["PASS"] == 20
    block = model_block(head, "moonshotai/Kimi-K3")
    assert (block["rows"], block["union_keys"], len(block["missing_keys"])) == (236, 244, 8)
    merge = model_block(states["k3-merge-a77804e"], "moonshotai/Kimi-K3")
    assert (merge["rows"], merge["union_keys"], merge["missing_keys"]) == (228, 228, [])
    assert count_model(head, "no/such-model") == {"rows": 0, "by_status": dict.fromkeys(
        ["PASS", "HYBRID_PASS", "FAIL", "HW_INCOMPATIBLE", "FRAMEWORK_INCOMPATIBLE"], 0)}
