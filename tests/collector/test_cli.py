"""`perfledger collect` end to end on the cpu backend, Mode 1 direct runs, usage errors, torch guard."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import polars as pl
import pytest
import yaml

from perfledger.collector.backends import BackendUnavailable, get_backend
from perfledger.collector.registry import load_registry
from tests.collector.conftest import REPO, cli, cli_json, write_grid

CPU_OPS = sorted(load_registry().ops_for("cpu"))


def test_collect_every_cpu_op_writes_the_contract(tmp_path):
    out = tmp_path / "out"
    summary = cli_json("collect", "--ops", *CPU_OPS, "--out", str(out), "--limit", "3", "--devices", "0,1")
    assert summary["system"] == "cpu_local" and summary["version"] == np.__version__
    assert yaml.safe_load((out / "batch.yaml").read_text()) == {
        "system": "cpu_local", "backend": "cpu", "version": np.__version__}
    meta = yaml.safe_load((out / "collection_meta.yaml").read_text())
    assert meta["runtime"]["framework"] == "numpy" and meta["runtime"]["version"] == np.__version__
    for op in CPU_OPS:
        entry = load_registry().get(op)
        info = summary["ops"][op]
        assert (info["done"], info["failed"], info["rows"]) == (3, 0, 3), op
        df = pl.read_csv(out / entry.perf_filename)
        assert df.columns[:5] == ["framework", "version", "device", "op_name", "kernel_source"]
        assert df.columns[-1] == "latency" and df["latency"].dtype == pl.Float64 and (df["latency"] > 0).all()
        table = meta["tables"][entry.table]
        assert table["rows"] == df.height and table["status"] == "complete"
        assert table["collector_hash"].startswith("sha256:") and table["case_plan_hash"].startswith("sha256:")
        assert json.loads((out / f"errors_cpu.{op}.json").read_text()) == []
        cp = json.loads((out / "collector_checkpoint" / "cpu" / f"cpu.{op}.json").read_text())
        assert len(cp["done"]) == 3 and cp["failed"] == [] and cp["framework_version"] == np.__version__


def test_oom_case_is_recorded_not_lost(tmp_path):
    """A case numpy cannot allocate fails fast with MemoryError: recorded as oom, the others still land."""
    grid = write_grid(tmp_path / "g.yaml", [{"gemm_dtype": "float32", "m": 10**7, "n": 10**7, "k": 10**7},
                                            {"gemm_dtype": "float32", "m": 4, "n": 64, "k": 64}])
    out = tmp_path / "out"
    info = cli_json("collect", "--ops", "gemm", "--grid", f"gemm={grid}", "--out", str(out))["ops"]["gemm"]
    assert (info["done"], info["failed"], info["classifications"]) == (1, 1, {"oom": 1})
    (record,) = json.loads((out / "errors_cpu.gemm.json").read_text())
    assert record["error_type"].endswith("MemoryError") and record["case"]["m"] == 10**7
    meta = yaml.safe_load((out / "collection_meta.yaml").read_text())["tables"]["gemm_perf"]
    assert (meta["rows"], meta["cases_failed"], meta["status"]) == (1, 1, "complete")


def test_plan_only_lists_stable_task_ids(tmp_path):
    plan = cli_json("collect", "--ops", "gemm", "mla_bmm", "--out", str(tmp_path / "o"), "--plan-only",
                    "--case-filter", "m=1,")
    assert set(plan) == {"gemm", "mla_bmm"} and not (tmp_path / "o").exists()
    gemm = plan["gemm"]
    assert gemm["cases"] == len(gemm["tasks"]) > 0 and all(t["case"]["m"] == 1 for t in gemm["tasks"])
    assert all(t["case"]["gemm_dtype"] == "float32" for t in gemm["tasks"])
    assert plan["mla_bmm"]["cases"] == 0  # no mla_bmm case has m=1
    again = cli_json("collect", "--ops", "gemm", "--out", str(tmp_path / "o"), "--plan-only", "--case-filter", "m=1,")
    assert [t["task_id"] for t in again["gemm"]["tasks"]] == [t["task_id"] for t in gemm["tasks"]]


@pytest.mark.parametrize("args, code, needle", [
    (["--ops", "nope"], 2, "unknown op 'nope'"),
    (["--ops", "gemm", "--devices", "a,b"], 2, "--devices 'a,b'"),
    (["--ops", "gemm", "--grid", "gemm=/nonexistent.yaml"], 2, "--grid 'gemm=/nonexistent.yaml'"),
    (["--ops", "gemm", "--device-backend", "torch", "--system", "h200_sxm"], 1, "torch backend: "),
    (["--ops", "gemm", "--device-backend", "tpu"], 1, "unknown backend 'tpu'"),
    (["--ops", "gemm", "--backend", "cpu"], 2, "the device backend is --device-backend cpu now"),  # the old spelling
])
def test_usage_and_runtime_errors(tmp_path, args, code, needle):
    proc = cli("collect", *args, "--out", str(tmp_path / "o"), check=False)
    assert proc.returncode == code and needle in proc.stderr, proc.stderr


def test_folder_of_another_batch_is_refused(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "batch.yaml").write_text("system: h200_sxm\nbackend: vllm\nversion: 0.20.0\n")
    proc = cli("collect", "--ops", "gemm", "--limit", "1", "--out", str(out), check=False)
    assert proc.returncode == 1 and "batch.yaml: folder holds batch" in proc.stderr


def test_torch_backend_is_guarded():
    try:
        import torch  # noqa: F401

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        pytest.skip("CUDA present: the guard is not exercised here (run the torch backend by hand)")
    with pytest.raises(BackendUnavailable, match="torch backend: "):
        get_backend("torch")


def test_mode1_direct_module_run(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), CUDA_VISIBLE_DEVICES="5")
    proc = subprocess.run([sys.executable, "-m", "perfledger.collector.ops.quantize", "--op", "scale_matrix", "--device", "0",
                           "--out", str(tmp_path), "--m", "16", "128", "--k", "1024"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "CUDA_VISIBLE_DEVICES=5" in proc.stdout
    df = pl.read_csv(tmp_path / "scale_matrix_perf.txt")
    assert df.columns == ["framework", "version", "device", "op_name", "kernel_source", "m", "k", "quant_dtype",
                          "latency"]
    assert df["op_name"].to_list() == ["scale_matrix"] * 2 and sorted(df["m"].to_list()) == [16, 128]
    assert not (tmp_path / "batch.yaml").exists()  # diagnostics are not a batch
