"""Pure-ish units: staging reconciliation for resume, metadata merging, checkpoint binding, lock guard."""

from __future__ import annotations

import json

import pytest

from perfledger.collector import meta
from perfledger.collector.case_grid import Task, parse_grid
from perfledger.collector.checkpoint import CheckpointError, load_checkpoint, open_checkpoint
from perfledger.collector.lockfile import HOST, FileLock
from perfledger.collector.runner import staged_task_ids
from perfledger.collector.staging import RowContext, append_rows

GRID = parse_grid({"columns": ["op_name", "bmm_dtype", "num_tokens", "num_heads"],
                   "sweeps": [{"op_name": ["mla_gen_pre", "mla_gen_post"], "bmm_dtype": "float32",
                               "num_tokens": [1, 8], "num_heads": 16}]}, "mla_bmm", "t.yaml")
TASKS = [Task("mla_bmm", tuple(sorted(c.items()))) for c in GRID.cases]


def test_rows_already_staged_count_as_done(tmp_path):
    path = tmp_path / "mla_bmm_perf.txt"
    for case in GRID.cases[:3]:
        ctx = RowContext("numpy", "2.4.6", "cpu", case["op_name"], "k")
        append_rows(path, ctx, [{"bmm_dtype": "float32", "num_tokens": case["num_tokens"],
                                 "num_heads": 16, "latency": 0.1}])
    assert staged_task_ids(path, "mla_bmm", GRID, TASKS) == {t.task_id for t in TASKS[:3]}
    assert staged_task_ids(tmp_path / "missing.txt", "mla_bmm", GRID, TASKS) == set()


def test_meta_merges_tables_and_refuses_another_runtime(tmp_path):
    runtime = {"framework": "numpy", "backend": "cpu", "version": "2.4.6", "device": "cpu"}
    entry = meta.table_entry(collector_hash="sha256:a", case_plan_hash="sha256:b", rows=3, planned=3, done=2,
                             failed=1, ops=["gemm"])
    meta.update_meta(tmp_path, runtime, "gemm_perf", entry)
    meta.update_meta(tmp_path, runtime, "mla_bmm_perf", {**entry, "status": "partial"})
    import yaml

    doc = yaml.safe_load((tmp_path / "collection_meta.yaml").read_text())
    assert set(doc["tables"]) == {"gemm_perf", "mla_bmm_perf"} and doc["tables"]["gemm_perf"]["status"] == "complete"
    with pytest.raises(meta.MetaError, match=r"collection_meta.yaml: runtime.version is '2.4.6', this run has '1.0'"):
        meta.update_meta(tmp_path, {**runtime, "version": "1.0"}, "gemm_perf", entry)
    assert meta.table_entry(collector_hash="", case_plan_hash="", rows=None, planned=3, done=3, failed=0,
                            ops=[], final=False)["status"] == "partial"


def test_collector_hash_tracks_the_grid(tmp_path):
    grid = tmp_path / "g.yaml"
    grid.write_text("columns: [m]\n")
    first = meta.collector_hash("perfledger.collector.ops.gemm", "cpu", "gemm", grid)
    grid.write_text("columns: [m, n]\n")
    assert meta.collector_hash("perfledger.collector.ops.gemm", "cpu", "gemm", grid) != first
    shipped = [meta.collector_hash("perfledger.collector.ops.gemm", "cpu", "gemm") for _ in range(2)]
    assert shipped[0] == shipped[1] != first


def test_checkpoint_roundtrip_and_bad_files(tmp_path):
    kw = dict(backend="cpu", op="gemm", table="gemm_perf", framework_version="2.4.6", sm_version=None)
    cp = open_checkpoint(tmp_path, resume=False, **kw)
    cp.mark("gemm:a", True)
    cp.mark("gemm:b", False)
    cp.save(force=True)
    again = open_checkpoint(tmp_path, resume=True, **kw)
    assert (again.done, again.failed) == ({"gemm:a"}, {"gemm:b"})
    assert open_checkpoint(tmp_path, resume=True, retry_failed=True, **kw).failed == set()
    with pytest.raises(CheckpointError, match="sm_version: checkpoint None vs runtime 90"):
        open_checkpoint(tmp_path, resume=True, **{**kw, "sm_version": 90})
    cp.path.write_text(json.dumps({"schema": "collector-resume-v1", "done": []}))
    with pytest.raises(CheckpointError, match=r"cpu.gemm.json: schema 'collector-resume-v1'"):
        load_checkpoint(cp.path)


def test_dead_breaker_guard_is_moved_aside(tmp_path):
    target = tmp_path / "gemm_perf.txt"
    lock, guard = tmp_path / "gemm_perf.txt.lock", tmp_path / "gemm_perf.txt.lock.break"
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock.write_text(f"{HOST} {dead.pid} holder")
    guard.write_text(f"{HOST} {dead.pid} breaker")  # a breaker died holding the guard
    with FileLock(target, timeout_s=10) as held:
        assert held.stats.broke_stale == 1 and lock.read_text() == held.token
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no lock, guard or breaker debris left


def test_reference_checkpoint_is_not_mistaken_for_ours():
    """A real reference checkpoint (collector-resume-v1, ids are Python reprs) cannot be resumed into."""
    from tests.collector.conftest import COLLECTED

    real = COLLECTED / "h200_sxm" / "collector_checkpoint" / "vllm" / "vllm.gemm.json"
    with pytest.raises(CheckpointError, match=r"vllm.gemm.json: schema 'collector-resume-v1', expected 'perfledger"):
        load_checkpoint(real)


def test_plan_matches_golden():
    """Task ids of the shipped cpu gemm plan are pinned: a change here silently breaks every resume."""
    from pathlib import Path

    from perfledger.collector.backends import get_backend
    from perfledger.collector.runner import CollectRequest, build_plan, plan_json
    from tests.collector.conftest import REPO

    golden = REPO / "tests" / "golden" / "collector" / "plan_gemm_cpu.json"
    plan = plan_json(build_plan(CollectRequest(backend="cpu", ops=["gemm"], out=Path(".")), get_backend("cpu"), None))
    assert plan == json.loads(golden.read_text()), f"regenerate {golden} only if the grid changed on purpose"
