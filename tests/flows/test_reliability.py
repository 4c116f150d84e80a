"""Reliability: kill -9 mid-ingest, two runs at once, a full disk and an unwritable warehouse.

Each leaves the warehouse consistent (every table reads at its latest version, every recorded batch
has all its rows) and a re-run completes with no duplicate and no lost row.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.flows.tasks import ledger_task
from perfledger.ledger.hooks import on_ingest
from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.lock import run_lock
from perfledger.warehouse.store import Warehouse
from tests.flows.reliability_worker import table_versions

REPO = Path(__file__).resolve().parents[2]
TRIALS = 20
VOLATILE = ("ingested_at", "started_at", "finished_at", "first_ingest", "last_ingest")


def _sources(tree: Path) -> list[str]:
    return [str(tree / "b200_sxm" / "kda"), str(tree / "l40s" / "kda"), str(tree / "h200_sxm" / "mla_bmm"),
            str(tree / "h200_sxm" / "gemm" / "sglang" / "0.5.6.post2")]


def _worker(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.flows.reliability_worker", *args], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def _start(proc: subprocess.Popen) -> None:
    assert proc.stdout.readline().strip() == "READY"
    proc.stdin.write("go\n")
    proc.stdin.flush()


def _state(root: Path | str) -> dict[str, pl.DataFrame]:
    """Curated tables and ledger cells without ingest timestamps, canonically sorted."""
    wh = Warehouse(root)
    out = {t: wh.read_curated(t) for t in wh.curated_tables()}
    cells = wh.read_table("ledger_cells")
    out["ledger_cells"] = cells.filter(pl.col("model") == "moonshotai/Kimi-K3").drop("batch_ids", strict=False)
    out = {k: f.drop([c for c in VOLATILE if c in f.columns]) for k, f in out.items()}
    return {k: f.sort([c for c in f.columns if not isinstance(f[c].dtype, (pl.List, pl.Struct))]) for k, f in out.items()}


def assert_consistent(root: Path | str) -> None:
    """Every table reads; every recorded batch has exactly its accepted rows in the curated tables."""
    table_versions(root)
    wh = Warehouse(root)
    if not wh.has_table("batches"):
        return
    batches = wh.read_table("batches")
    assert batches["content_hash"].is_unique().all(), "a batch was recorded twice"
    recorded = wh.read_table("batch_tables").filter(pl.col("batch_id").is_in(batches["batch_id"].implode()))
    for (table,), expected in recorded.group_by("table"):
        present = dict(wh.read_curated_columns(table, ["batch_id"]).group_by("batch_id").len().iter_rows())
        for batch_id, rows in expected.select("batch_id", "rows_accepted").iter_rows():
            assert present.get(batch_id, 0) == rows, (table, batch_id)


def kill_9_and_rerun(sources: list[str], place: Callable[[str], Path | str], trials: int) -> int:
    """Kill an ingest into `place(name)` at random moments; each time the warehouse must be consistent and
    a re-run must equal a clean ingest (`place("ref")`). Returns how many kills landed mid-run."""
    ingest(sources, Warehouse(place("ref")), on_commit=on_ingest)
    ledger_task.fn(str(place("ref")), "kimi-k3")
    reference = _state(place("ref"))
    clean = _worker("ingest", str(place("timed")), *sources)
    _start(clean)
    out, _ = clean.communicate(timeout=120)
    budget = json.loads(out.splitlines()[-1])["seconds"]
    rng = random.Random(7)
    killed_mid_run = 0
    upcoming = _worker("ingest", str(place("wh0")), *sources)
    for trial in range(trials):
        root = place(f"wh{trial}")
        proc = upcoming
        _start(proc)
        upcoming = _worker("ingest", str(place(f"wh{trial + 1}")), *sources) if trial + 1 < trials else None
        time.sleep(rng.uniform(0, budget))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        killed_mid_run += proc.returncode == -signal.SIGKILL
        assert_consistent(root)
        ingest(sources, Warehouse(root), on_commit=on_ingest)
        assert_consistent(root)
        # A kill between the batches commit and the ledger hook leaves cells to the next ledger stage.
        ledger_task.fn(str(root), "kimi-k3")
        state = _state(root)
        assert state.keys() == reference.keys()
        for name, frame in reference.items():
            assert state[name].equals(frame), f"trial {trial}: {name} differs after re-run"
    return killed_mid_run


def test_kill_9_at_random_points_never_corrupts_and_rerun_converges(tmp_path: Path, shared_tree: Path) -> None:
    killed_mid_run = kill_9_and_rerun(_sources(shared_tree), lambda name: tmp_path / name, TRIALS)
    assert killed_mid_run >= TRIALS // 2, f"only {killed_mid_run} kills landed before the ingest finished"


def two_concurrent_ingests(sources: list[str], root: Path | str) -> list[int]:
    """Start two ingests of the same sources at once: each commits or is told busy, nothing doubles.
    Returns the new-batch counts of those that committed."""
    procs = [_worker("ingest", str(root), *sources) for _ in range(2)]
    for proc in procs:
        _start(proc)
    outputs = [proc.communicate(timeout=120) for proc in procs]
    done = [json.loads(out.splitlines()[-1])["new_batches"]
            for (out, _), p in zip(outputs, procs, strict=True) if p.returncode == 0]
    busy = [err for (_, err), p in zip(outputs, procs, strict=True) if p.returncode != 0]
    assert all("is busy: another run holds its lock" in err for err in busy) and len(done) >= 1
    batches = Warehouse(root).read_table("batches")
    assert batches["content_hash"].is_unique().all() and sum(done) == batches.height and min(done) in (0, batches.height)
    assert_consistent(root)
    return done


def test_two_concurrent_ingests_one_waits_and_nothing_doubles(tmp_path: Path, shared_tree: Path) -> None:
    two_concurrent_ingests(_sources(shared_tree), tmp_path / "wh")


def test_a_held_lock_gives_a_clear_busy_error(tmp_path: Path, shared_tree: Path) -> None:
    wh = tmp_path / "wh"
    with run_lock(wh, purpose="test holder"):
        result = CliRunner().invoke(app, ["ingest", str(shared_tree / "l40s" / "kda"), "--warehouse", str(wh), "--json"])
    assert result.exit_code == 1
    assert "is busy: another run holds its lock" in result.output and "test holder" in result.output
    assert not (wh / "batches").exists()


def _namespaced_tmpfs(target: Path, size: str) -> list[str] | None:
    """A command prefix running in a private mount namespace with a small tmpfs on `target`, if possible."""
    if not shutil.which("unshare"):
        return None
    flags = ["--mount"] if os.geteuid() == 0 else ["--user", "--map-root-user", "--mount"]
    probe = subprocess.run(["unshare", *flags, "sh", "-c", f"mount -t tmpfs -o size={size} tmpfs '{target}'"],
                           capture_output=True)
    if probe.returncode != 0:
        return None
    return ["unshare", *flags, "sh", "-c", f"mount -t tmpfs -o size={size} tmpfs \"$0\" && exec \"$@\"", str(target)]


def test_disk_full_gives_a_clear_error_and_no_partial_version(tmp_path: Path, shared_tree: Path) -> None:
    wh = tmp_path / "wh"
    wh.mkdir()
    args = [sys.executable, "-m", "tests.flows.reliability_worker", "full", str(wh), str(shared_tree / "l40s" / "kda"),
            str(shared_tree / "h200_sxm" / "gemm" / "vllm" / "0.24.0")]
    prefix = _namespaced_tmpfs(wh, "400k")
    if prefix is not None:  # a real ENOSPC
        run = subprocess.run([*prefix, *args], cwd=REPO, capture_output=True, text=True, timeout=120)
        expected = "No space left on device"
    else:  # no mount namespace here: the same failure path through the file-size limit (EFBIG)
        code = ("import resource,signal,runpy,sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
                "resource.setrlimit(resource.RLIMIT_FSIZE, (150000, 150000)); sys.argv=sys.argv[1:]; "
                "runpy.run_module('tests.flows.reliability_worker', run_name='__main__')")
        run = subprocess.run([sys.executable, "-c", code, *args[2:]], cwd=REPO, capture_output=True, text=True, timeout=120)
        expected = "File too large"
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["first"] == 0 and report["code"] == 1, report["output"]
    assert "cannot write" in report["output"] and expected in report["output"] and "Traceback" not in report["output"]
    assert report["after"]["batches"] == report["before"]["batches"]


def _lock_down(root: Path, on: bool) -> None:
    """Make every folder of the warehouse unwritable (immutable for root, read-only mode otherwise)."""
    folders = [root, *(p for p in root.rglob("*") if p.is_dir())]
    for folder in folders:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "+i" if on else "-i", str(folder)], check=True)
        else:
            folder.chmod(0o555 if on else 0o755)


def test_unwritable_warehouse_gives_a_clear_error_and_no_new_version(tmp_path: Path, shared_tree: Path) -> None:
    wh = tmp_path / "wh"
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(shared_tree / "l40s" / "kda"), "--warehouse", str(wh)]).exit_code == 0
    before = table_versions(wh)
    _lock_down(wh, True)
    try:
        result = runner.invoke(app, ["ingest", str(shared_tree / "b200_sxm" / "kda"), "--warehouse", str(wh), "--json"])
        after = table_versions(wh)
    finally:
        _lock_down(wh, False)
    assert result.exit_code == 1
    assert "cannot write warehouse" in result.output
    assert "Operation not permitted" in result.output or "Permission denied" in result.output
    assert after == before
    assert runner.invoke(app, ["ingest", str(shared_tree / "b200_sxm" / "kda"), "--warehouse", str(wh)]).exit_code == 0
    assert_consistent(wh)


def test_a_second_pipeline_run_on_the_same_output_folder_is_told_busy(tmp_path: Path) -> None:
    from perfledger.flows.config import load_pipeline_config
    from perfledger.flows.pipeline import PipelineBusy, run_pipeline

    cfg = load_pipeline_config(warehouse=str(tmp_path / "wh"), out=tmp_path / "out")
    with run_lock(tmp_path / "out" / ".pipeline", purpose="perfledger run"):
        with pytest.raises(PipelineBusy, match=r"output folder .*out is busy: another perfledger run holds it .*perfledger run"):
            run_pipeline(cfg, wait_s=0.2)
    assert not (tmp_path / "wh").exists()
