"""Device pool with a fake device list: distribution, per-child CUDA_VISIBLE_DEVICES, kill -9, timeouts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from perfledger.collector.case_grid import task_id
from perfledger.collector.failures import read_errors
from tests.collector.conftest import REPO, cli_json, read_events, write_grid

F32 = "float32"


def _case(m, n=64, k=64):
    return {"gemm_dtype": F32, "m": m, "n": n, "k": k}


def test_isolated_cases_spread_over_devices_each_child_pinned(tmp_path):
    grid = write_grid(tmp_path / "g.yaml", [_case(m) for m in range(1, 13)])
    out = tmp_path / "out"
    summary = cli_json("collect", "--ops", "gemm", "--grid", f"gemm={grid}", "--out", str(out),
                       "--devices", "0,1,2", "--isolate")
    assert summary["ops"]["gemm"] | {"classifications": {}} == {
        "table": "gemm_perf", "planned": 12, "ran": 12, "done": 12, "failed": 0, "rows": 12, "classifications": {}}
    ends = [e for e in read_events(out) if e["event"] == "end"]
    assert len(ends) == 12 and all(e["ok"] for e in ends)
    assert all(e["child_env"] == str(e["device"]) for e in ends)  # each child saw only its own device
    assert {e["device"] for e in ends} == {0, 1, 2}
    logs = sorted((out / "logs" / "cpu.gemm").glob("*.log"))
    assert len(logs) == 12 and all("CUDA_VISIBLE_DEVICES=" in p.read_text() for p in logs)


def _popen_collect(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "perfledger.cli", "collect", *args, "--json"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))


def _wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def test_killed_worker_is_restarted_and_its_task_recorded_failed(tmp_path):
    huge = _case(3072, 3072, 3072)
    medium = [_case(768 + i, 768, 768) for i in range(24)]
    grid = write_grid(tmp_path / "g.yaml", [huge, *medium], runs=3, warmup=1)
    out = tmp_path / "out"
    proc = _popen_collect("--ops", "gemm", "--grid", f"gemm={grid}", "--out", str(out), "--devices", "0,1")
    huge_id = task_id("gemm", huge)
    try:
        start = _wait_for(lambda: next((e for e in read_events(out)
                                         if e["event"] == "start" and e["task_id"] == huge_id), None))
        os.kill(start["pid"], signal.SIGKILL)
        killed_at = time.time()
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, stderr
    info = json.loads(stdout)["ops"]["gemm"]
    assert (info["done"], info["failed"], info["rows"]) == (24, 1, 24)
    (record,) = read_errors(out / "errors_cpu.gemm.json")
    assert record["task_id"] == huge_id and record["error_type"] == "WorkerSignalCrash"
    assert record["classification"] == "crash" and record["exit_code"] == -9 and record["device"] == start["device"]
    later = [e for e in read_events(out) if e["device"] == start["device"] and e["t"] > killed_at]
    assert later and all(e["pid"] != start["pid"] for e in later)  # a fresh worker took over the slot
    cp = json.loads((out / "collector_checkpoint" / "cpu" / "cpu.gemm.json").read_text())
    assert cp["failed"] == [huge_id] and len(cp["done"]) == 24


@pytest.mark.parametrize("isolate, error_type", [(False, "TaskTimeout"), (True, "TimeoutExpired")])
def test_overrunning_case_times_out_and_the_rest_still_run(tmp_path, isolate, error_type):
    slow = _case(3072, 3072, 3072)
    grid = write_grid(tmp_path / "g.yaml", [slow, _case(2), _case(3)], runs=5, warmup=1)
    out = tmp_path / "out"
    extra = ["--isolate"] if isolate else []
    summary = cli_json("collect", "--ops", "gemm", "--grid", f"gemm={grid}", "--out", str(out),
                       "--devices", "0", "--timeout", "1.5", *extra)
    assert (summary["ops"]["gemm"]["done"], summary["ops"]["gemm"]["failed"]) == (2, 1)
    (record,) = read_errors(out / "errors_cpu.gemm.json")
    assert record["error_type"] == error_type and record["classification"] == "timeout"
