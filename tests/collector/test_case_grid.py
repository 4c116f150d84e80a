"""Case grids: expansion, dedup, model shapes kept correlated, stable ids, filters, bad input."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from perfledger.collector.case_grid import CaseGridError, Task, canonical, load_grid, parse_grid, plan_hash, select_tasks, task_id
from perfledger.collector.registry import load_registry


def _grid(doc):
    return parse_grid(doc, "t", "t.yaml")


def test_sweeps_cross_and_models_stay_correlated():
    grid = _grid({
        "columns": ["d", "m", "n"],
        "sweeps": [{"d": ["a"], "m": [1, 2], "n": [10, 20]}],
        "models": {"X": [{"d": "a", "m": [1], "n": 10}, {"d": "a", "m": 7, "n": 70}]},
    })
    got = [(c["m"], c["n"]) for c in grid.cases]
    assert got == [(1, 10), (1, 20), (2, 10), (2, 20), (7, 70)]  # (1,10) from the model is a duplicate
    assert (7, 10) not in got and (1, 70) not in got  # model shape never crossed with the sweep


@given(st.dictionaries(st.sampled_from(["m", "n", "k", "dtype"]), st.integers(0, 10**6), min_size=1))
def test_task_id_ignores_key_order_and_int_float_spelling(case):
    reordered = dict(reversed(list(case.items())))
    as_float = {k: float(v) for k, v in case.items()}
    assert task_id("gemm", case) == task_id("gemm", reordered) == task_id("gemm", as_float)
    assert canonical(case) == canonical(reordered)


def test_task_id_depends_on_op_and_values():
    case = {"m": 1, "n": 2}
    assert task_id("gemm", case) != task_id("mla_bmm", case)
    assert task_id("gemm", case) != task_id("gemm", {"m": 1, "n": 3})
    assert Task("gemm", tuple(sorted(case.items()))).task_id == task_id("gemm", case)


def test_plan_hash_is_order_free():
    assert plan_hash(["b", "a", "a"]) == plan_hash({"a", "b"}) != plan_hash({"a"})


@pytest.mark.parametrize("doc, needle", [
    ({"sweeps": []}, "'columns' is required"),
    ({"columns": ["m"], "sweeps": [{"m": [1], "n": [2]}]},
     "sweeps[0]: columns must be exactly ['m']; missing [], unknown ['n']"),
    ({"columns": ["m", "n"], "sweeps": [{"m": [1]}]}, "missing ['n']"),
    ({"columns": ["m"], "sweeps": [{"m": []}]}, "sweeps[0].m: empty value list"),
    ({"columns": ["m"], "models": {"X": {"m": 1}}}, "models.X must be a list"),
    ({"columns": ["m"], "sweeps": [[1, 2]]}, "sweeps[0]: expected a mapping"),
    ({"columns": ["m"], "timing": {"runs": 0}}, "runs must be >= 1"),
])
def test_bad_grid_names_file_and_key(doc, needle):
    with pytest.raises(CaseGridError) as err:
        _grid(doc)
    assert "t.yaml" in str(err.value) and needle in str(err.value)


def test_invalid_yaml_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("columns: [m\n")
    with pytest.raises(CaseGridError, match="bad.yaml: invalid YAML"):
        load_grid("gemm", bad)


@pytest.mark.parametrize("op", sorted(load_registry().ops))
def test_shipped_grids_parse_and_dedup(op):
    entry = load_registry().get(op)
    grid = load_grid(entry.cases)
    canon = [canonical(c) for c in grid.cases]
    assert len(canon) == len(set(canon)) > 0
    assert entry.dtype_field in grid.columns


def test_select_tasks_filters():
    grid = _grid({"columns": ["dt", "m"], "sweeps": [{"dt": ["fp8", "bf16", "f32"], "m": [1, 2, 3]}]})
    kw = dict(dtype_field="dt", dtype_min_sm={"fp8": 89})
    all_ok = select_tasks("op", grid, dtypes=("fp8", "bf16"), sm=90, **kw)
    assert len(all_ok) == 6
    assert {t.params["dt"] for t in select_tasks("op", grid, dtypes=("fp8", "bf16"), sm=80, **kw)} == {"bf16"}
    assert len(select_tasks("op", grid, dtypes=("fp8", "bf16"), sm=None, **kw)) == 6  # cpu: no SM floors
    filtered = select_tasks("op", grid, dtypes=("fp8", "bf16"), sm=90, case_filters=("m=2", "m=3,"), **kw)
    assert sorted(t.params["m"] for t in filtered) == [2, 2]
    assert len(select_tasks("op", grid, dtypes=("fp8", "bf16"), sm=90, limit=4, **kw)) == 4


def test_yaml_reformatting_keeps_ids(tmp_path):
    """Resume survives formatting changes: flow vs block style, key order, 64 vs 64.0."""
    a = tmp_path / "a.yaml"
    b = tmp_path / "b.yaml"
    a.write_text(yaml.safe_dump({"columns": ["gemm_dtype", "m", "n", "k"],
                                 "sweeps": [{"gemm_dtype": "float32", "m": [1, 2], "n": 64, "k": 64}]}))
    b.write_text("columns: [gemm_dtype, m, n, k]\nsweeps:\n  - {k: 64.0, n: 64, m: [1, 2], gemm_dtype: [float32]}\n")
    ids = lambda p: {Task("gemm", tuple(sorted(c.items()))).task_id for c in load_grid("gemm", p).cases}  # noqa: E731
    assert ids(a) == ids(b)
