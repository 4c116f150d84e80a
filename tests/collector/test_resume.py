"""Resume after an interruption runs only the missing cases; checkpoints refuse other runtimes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import polars as pl
import yaml

from perfledger.collector.staging import count_rows
from tests.collector.conftest import REPO, cli, cli_json, write_grid

N = 16


def _grid(tmp_path):
    return write_grid(tmp_path / "g.yaml", [{"gemm_dtype": "float32", "m": 512 + i, "n": 512, "k": 512}
                                            for i in range(N)], runs=5, warmup=1)


def test_interrupted_run_resumes_only_missing_cases(tmp_path):
    grid, out = _grid(tmp_path), tmp_path / "out"
    staging = out / "gemm_perf.txt"
    proc = subprocess.Popen([sys.executable, "-m", "perfledger.cli", "collect", "--ops", "gemm", "--grid",
                             f"gemm={grid}", "--out", str(out), "--devices", "0"], cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=str(REPO)), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while count_rows(staging) < 4 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole run dies: parent and worker
    proc.wait()
    before = count_rows(staging)
    assert 4 <= before < N, "the run finished before it could be interrupted"
    interrupted = yaml.safe_load((out / "collection_meta.yaml").read_text())["tables"]["gemm_perf"]
    assert (interrupted["status"], interrupted["rows"]) == ("partial", None)

    refused = cli("collect", "--ops", "gemm", "--grid", f"gemm={grid}", "--out", str(out), check=False)
    assert refused.returncode == 1 and "pass --resume or use a fresh --out" in refused.stderr

    summary = cli_json("collect", "--ops", "gemm", "--grid", f"gemm={grid}", "--out", str(out), "--resume")
    info = summary["ops"]["gemm"]
    assert info["ran"] == N - before and info["done"] == N and info["rows"] == N
    df = pl.read_csv(staging)
    assert df.height == N and df.select("m").n_unique() == N  # nothing ran twice
    finished = yaml.safe_load((out / "collection_meta.yaml").read_text())["tables"]["gemm_perf"]
    assert (finished["status"], finished["rows"], finished["cases_done"]) == ("complete", N, N)
    again = cli_json("collect", "--ops", "gemm", "--grid", f"gemm={grid}", "--out", str(out), "--resume")
    assert again["ops"]["gemm"]["ran"] == 0 and count_rows(staging) == N


def test_resume_refuses_another_runtime(tmp_path):
    grid, out = _grid(tmp_path), tmp_path / "out"
    cli("collect", "--ops", "gemm", "--grid", f"gemm={grid}", "--out", str(out), "--limit", "2")
    cp_path = out / "collector_checkpoint" / "cpu" / "cpu.gemm.json"
    doc = json.loads(cp_path.read_text())
    doc["framework_version"] = "1.26.0"
    cp_path.write_text(json.dumps(doc))
    proc = cli("collect", "--ops", "gemm", "--grid", f"gemm={grid}", "--out", str(out), "--resume", check=False)
    assert proc.returncode == 1
    assert "cannot resume on another runtime (framework_version: checkpoint '1.26.0'" in proc.stderr


def test_retry_failed_reruns_only_failures(tmp_path):
    grid, out = _grid(tmp_path), tmp_path / "out"
    staging = out / "gemm_perf.txt"
    out.mkdir()
    staging.write_bytes(b"framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency,power\r\n")
    first = cli_json("collect", "--ops", "gemm", "--grid", f"gemm={grid}", "--out", str(out), "--limit", "3")
    assert (first["ops"]["gemm"]["done"], first["ops"]["gemm"]["failed"]) == (0, 3)
    errors = json.loads((out / "errors_cpu.gemm.json").read_text())
    assert {e["error_type"] for e in errors} == {"StagingError"} and "schema mismatch" in errors[0]["message"]
    staging.unlink()  # operator fixes the cause
    skipped = cli_json("collect", "--ops", "gemm", "--grid", f"gemm={grid}", "--out", str(out), "--limit", "3",
                       "--resume")
    assert skipped["ops"]["gemm"]["ran"] == 0
    retried = cli_json("collect", "--ops", "gemm", "--grid", f"gemm={grid}", "--out", str(out), "--limit", "3",
                       "--resume", "--retry-failed")
    assert retried["ops"]["gemm"] | {"classifications": None} == {
        "table": "gemm_perf", "planned": 3, "ran": 3, "done": 3, "failed": 0, "rows": 3, "classifications": None}
    assert json.loads((out / "errors_cpu.gemm.json").read_text()) == []
