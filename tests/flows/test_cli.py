"""The CLI contract scripts depend on: JSON shapes and exit codes of ingest, validate, tables."""

from __future__ import annotations

import json
import os
from pathlib import Path

from typer.testing import CliRunner

from perfledger.cli import app
from tests.warehouse.conftest import GEMM_HEADER, H200_VLLM, gemm_line, write_staging

runner = CliRunner()
INGEST_KEYS = {"batches", "new_batches", "rows_accepted", "rows_quarantined", "rows_duplicate", "failed_batches", "tables"}


def _json(result) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_ingest_json_contract_and_exit_codes(tmp_path: Path) -> None:
    folder = write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, [gemm_line(1), gemm_line(2, "-1")], batch=H200_VLLM)
    wh = str(tmp_path / "wh")
    result = runner.invoke(app, ["ingest", str(folder), "--warehouse", wh, "--json"])
    assert result.exit_code == 0, result.output
    payload = _json(result)
    assert INGEST_KEYS <= set(payload)
    assert (payload["batches"], payload["new_batches"], payload["rows_accepted"], payload["rows_quarantined"]) == (1, 1, 1, 1)
    assert payload["tables"] == {"gemm_perf": 1}

    tables = runner.invoke(app, ["tables", "--warehouse", wh, "--json"])
    assert json.loads(tables.stdout) == [{"table": "gemm_perf", "system": "h200_sxm", "family": "gemm", "backend": "vllm",
                                          "version": "0.20.0", "rows": 1}]
    kept = runner.invoke(app, ["tables", "--warehouse", wh, "--table", "gemm_perf", "--system", "h200_sxm", "--json"])
    assert json.loads(kept.stdout) == json.loads(tables.stdout)
    typo = runner.invoke(app, ["tables", "--warehouse", wh, "--system", "h201_sxm"])
    assert typo.exit_code == 1 and "did you mean h200_sxm" in typo.stderr and len(typo.stderr.splitlines()) == 1
    human = runner.invoke(app, ["tables", "--warehouse", wh, "--backend", "vllm"]).stdout.splitlines()
    assert human[0].startswith("1 slices, 1 rows") and human[1].split() == ["table", "system", "family", "backend",
                                                                             "version", "rows"]
    empty = runner.invoke(app, ["tables", "--warehouse", str(tmp_path / "none")])
    assert empty.exit_code == 1 and "perfledger ingest" in empty.stderr

    (folder / "moe_perf.txt").write_text("")
    failed = runner.invoke(app, ["ingest", str(folder), "--warehouse", wh, "--json"])
    assert failed.exit_code == 1
    assert "empty file" in _json(failed)["failed_batches"][0]["error"]


def test_validate_writes_nothing(tmp_path: Path) -> None:
    folder = write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, [gemm_line(1)], batch=H200_VLLM)
    result = runner.invoke(app, ["validate", str(folder), "--json"], env={"PERFLEDGER_WAREHOUSE": str(tmp_path / "wh")})
    assert result.exit_code == 0 and _json(result)["rows_accepted"] == 1
    assert not (tmp_path / "wh").exists()


def test_version_is_the_installed_distributions() -> None:
    from importlib.metadata import version

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"perfledger {version('perfledger')}\n"


def test_validate_counts_content_the_warehouse_holds_as_known(tmp_path: Path) -> None:
    folder = write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, [gemm_line(1)], batch=H200_VLLM)
    wh = str(tmp_path / "wh")
    before = runner.invoke(app, ["validate", str(folder), "--warehouse", wh, "--json"])
    assert before.exit_code == 0 and _json(before)["new_batches"] == 1
    assert runner.invoke(app, ["ingest", str(folder), "--warehouse", wh, "--json"]).exit_code == 0
    written = sorted(p.relative_to(wh) for p in Path(wh).rglob("*"))
    after = runner.invoke(app, ["validate", str(folder), "--warehouse", wh, "--json"])
    assert after.exit_code == 0 and (_json(after)["batches"], _json(after)["new_batches"]) == (1, 0)
    assert sorted(p.relative_to(wh) for p in Path(wh).rglob("*")) == written


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["ingest", str(tmp_path / "nope"), "--warehouse", str(tmp_path / "wh"), "--json"])
    assert missing.exit_code == 2 and "no such file or directory" in _json(missing)["error"]
    assert runner.invoke(app, ["ingest"]).exit_code == 2
    assert runner.invoke(app, ["tables", "--bogus"]).exit_code == 2


def test_run_and_backfill_usage_errors_exit_2(tmp_path: Path) -> None:
    bad_runner = runner.invoke(app, ["run", "--runner", "spark", "--json"])
    assert bad_runner.exit_code == 2 and _json(bad_runner)["error"] == "--runner 'spark': expected local or dask"
    stray_address = runner.invoke(app, ["run", "--address", "tcp://h:8786", "--json"])
    assert stray_address.exit_code == 2
    assert _json(stray_address)["error"] == "--address tcp://h:8786 needs --runner dask (the local runner has no scheduler)"
    bad_until = runner.invoke(app, ["backfill", "--since", "2026-01-01", "--until", "soon", "--out", str(tmp_path)])
    assert bad_until.exit_code == 2 and "--until 'soon': expected a date YYYY-MM-DD" in bad_until.output
    bad_config = runner.invoke(app, ["run", "--config", str(tmp_path / "none.yaml")])
    assert bad_config.exit_code == 2 and "none.yaml: cannot read pipeline config" in bad_config.output


def test_backfill_window_is_checked_before_prefect_starts(tmp_path: Path) -> None:
    """An --until before --since is one line and exit 2, with no Prefect server start or flow traceback before it."""
    result = runner.invoke(app, ["backfill", "--since", "2026-02-01", "--until", "2026-01-01", "--out", str(tmp_path / "o"),
                                 "--warehouse", str(tmp_path / "wh")])
    assert result.exit_code == 2 and result.stderr == "error: --until 2026-01-01 is before --since 2026-02-01\n"
    assert not (tmp_path / "o").exists() and not (tmp_path / "wh").exists()


def test_backfill_models_are_resolved_before_prefect_starts(tmp_path: Path) -> None:
    result = runner.invoke(app, ["backfill", "--since", "2026-01-01", "--models", "kimi-k4", "--out", str(tmp_path / "o"),
                                 "--warehouse", str(tmp_path / "wh")])
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1 and "did you mean: kimi-k3" in result.stderr
    assert not (tmp_path / "o").exists()


def test_prefect_logs_are_quiet_unless_verbose(monkeypatch) -> None:
    from perfledger.flows.cli import _quiet_prefect

    monkeypatch.delenv("PREFECT_LOGGING_LEVEL", raising=False)
    _quiet_prefect(False)
    assert os.environ["PREFECT_LOGGING_LEVEL"] == "WARNING"
    monkeypatch.setenv("PREFECT_LOGGING_LEVEL", "DEBUG")  # the caller's choice stands
    _quiet_prefect(False)
    assert os.environ["PREFECT_LOGGING_LEVEL"] == "DEBUG"
    _quiet_prefect(True)
    assert os.environ["PREFECT_LOGGING_LEVEL"] == "INFO"
