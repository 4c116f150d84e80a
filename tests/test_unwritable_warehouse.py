"""Every command that writes the warehouse, on a warehouse that cannot be written: one clear line, exit 1,
nothing changed. Tests run as root, where chmod stops nothing, so the warehouse is made unwritable for
real: a read-only tmpfs mount (where `mount` is allowed) or its run-lock file replaced by a folder."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.warehouse.lock import LOCK_NAME, run_lock
from perfledger.warehouse.store import Warehouse
from tests.ledger.curated import MATRIX_STATES
from tests.warehouse.conftest import GEMM_HEADER, H200_VLLM, gemm_line, snapshot, write_staging

runner = CliRunner()
WRITTEN = ("support_matrix", "ledger_cells", "ledger_events", "ledger_decisions")


def _mount(*args: str) -> bool:
    return shutil.which("mount") is not None and subprocess.run(["mount", *args], capture_output=True).returncode == 0


def _fill(root: Path, tmp: Path) -> None:
    """A warehouse with one ingested batch, one matrix snapshot and one ledger build."""
    source = write_staging(tmp / "first", "gemm_perf", GEMM_HEADER, [gemm_line(1)], batch=H200_VLLM)
    matrix = tmp / "matrix"
    matrix.mkdir()
    shutil.copyfile(MATRIX_STATES / "head-095f58a" / "b60.csv", matrix / "b60.csv")
    for args in (["ingest", str(source)], ["matrix", "import", str(matrix), "--label", "b60"], ["ledger", "build", "kimi-k3"]):
        result = runner.invoke(app, [*args, "--warehouse", str(root)])
        assert result.exit_code == 0, result.output


@pytest.fixture(params=["read-only-mount", "lock-is-a-folder"])
def unwritable(request, tmp_path: Path) -> Iterator[Path]:
    """A filled warehouse root that no process can write, made so by the seam in the parameter."""
    root = tmp_path / "wh"
    root.mkdir()
    if request.param == "read-only-mount":
        if not _mount("-t", "tmpfs", "-o", "size=64m", "tmpfs", str(root)):
            pytest.skip("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)")
        try:
            _fill(root, tmp_path)
            assert _mount("-o", "remount,ro", str(root))
            yield root
        finally:
            subprocess.run(["umount", "-l", str(root)], check=True)
        return
    _fill(root, tmp_path)
    (root / LOCK_NAME).unlink(missing_ok=True)
    (root / LOCK_NAME).mkdir()
    yield root


def _state(root: Path) -> dict:
    wh = Warehouse(root)
    return snapshot(wh) | {name: wh.table_version(name) for name in WRITTEN}


def _new_batch(tmp: Path) -> str:
    return str(write_staging(tmp / "second", "gemm_perf", GEMM_HEADER, [gemm_line(2)], batch=H200_VLLM | {"version": "0.21.0"}))


def _config(tmp: Path, root: Path) -> str:
    path = tmp / "pipeline.yaml"
    path.write_text(yaml.safe_dump({"sources": [_new_batch(tmp)], "models": ["kimi-k3"], "warehouse": str(root),
                                    "out": str(tmp / "site"), "stages": ["ingest", "ledger", "publish"]}))
    return str(path)


WRITERS = {
    "ingest": lambda tmp, root: ["ingest", _new_batch(tmp)],
    "ledger build": lambda tmp, root: ["ledger", "build", "kimi-k3"],
    "ledger decide": lambda tmp, root: ["ledger", "decide", "kimi-k3", "--date", "2026-01-02", "--text", "noted"],
    "matrix import": lambda tmp, root: ["matrix", "import", str(MATRIX_STATES / "head-095f58a"), "--label", "head"],
    "matrix build": lambda tmp, root: ["matrix", "build", "kimi-k3"],
    "run": lambda tmp, root: ["run", "--config", _config(tmp, root)],
    "backfill": lambda tmp, root: ["backfill", "--since", "2000-01-01", "--config", _config(tmp, root)],
}


@pytest.mark.parametrize("command", WRITERS)
def test_a_writer_on_an_unwritable_warehouse_says_so_in_one_line(tmp_path: Path, unwritable: Path, command: str) -> None:
    before = _state(unwritable)
    args = WRITERS[command](tmp_path, unwritable)
    warehouse = [] if command in ("run", "backfill") else ["--warehouse", str(unwritable)]
    result = runner.invoke(app, [*args, *warehouse])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.stderr.splitlines() == [result.stderr.strip()], result.stderr
    assert result.stderr.startswith(f"error: cannot write warehouse {unwritable}: "), result.stderr
    assert _state(unwritable) == before


def test_json_callers_get_the_error_as_json(tmp_path: Path, unwritable: Path) -> None:
    result = runner.invoke(app, ["ledger", "decide", "kimi-k3", "--date", "2026-01-02", "--text", "noted",
                                 "--warehouse", str(unwritable), "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"].startswith(f"cannot write warehouse {unwritable}: ")


def test_readers_still_read_it(unwritable: Path) -> None:
    for args in (["tables"], ["matrix", "labels"], ["ledger", "events", "kimi-k3"]):
        result = runner.invoke(app, [*args, "--warehouse", str(unwritable)])
        assert result.exit_code == 0, result.output
    assert "b60" in runner.invoke(app, ["matrix", "labels", "--warehouse", str(unwritable)]).stdout


def test_a_busy_warehouse_is_one_line_too(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    with run_lock(root, purpose="test holder"):
        result = runner.invoke(app, ["ledger", "decide", "kimi-k3", "--date", "2026-01-02", "--text", "noted",
                                     "--warehouse", str(root)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.stderr.splitlines() == [result.stderr.strip()] and "is busy" in result.stderr, result.stderr
