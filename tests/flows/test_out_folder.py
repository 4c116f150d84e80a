"""`perfledger run --out` into a symlink to a folder in another tree: refused before any stage, unless
--allow-symlinked-out, which publishes the site there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfledger.cli import app
from tests.flows.conftest import write_config
from tests.warehouse.conftest import GEMM_HEADER, H200_VLLM, gemm_line, write_staging

runner = CliRunner()


def _setup(tmp_path: Path) -> tuple[list[str], Path]:
    source = write_staging(tmp_path / "src", "gemm_perf", GEMM_HEADER, [gemm_line(1)], batch=H200_VLLM)
    config = write_config(tmp_path / "p.yaml", sources=[str(source)], models=[], warehouse=tmp_path / "wh",
                          stages=["ingest", "publish"])
    target = tmp_path / "other-tree" / "site"
    target.mkdir(parents=True)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "site").symlink_to(target)
    return ["run", "--config", str(config), "--out", str(tmp_path / "mine" / "site")], target


def test_a_symlinked_out_is_refused_before_any_stage(tmp_path: Path) -> None:
    args, target = _setup(tmp_path)
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [result.stderr.strip()] and "--allow-symlinked-out" in result.stderr
    assert not any(target.iterdir()) and not (tmp_path / "wh").exists()


@pytest.mark.xdist_group("prefect")
def test_allow_symlinked_out_publishes_through_the_link(tmp_path: Path, prefect_server) -> None:
    args, target = _setup(tmp_path)
    result = runner.invoke(app, [*args, "--allow-symlinked-out", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1])["ingest"]["rows_accepted"] == 1
    assert (target / "index.html").is_file() and (target / "summary.md").is_file()
