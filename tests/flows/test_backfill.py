"""Backfills through the CLI: an idempotent re-derivation of a collection-date window."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.warehouse.store import Warehouse
from tests.flows.conftest import write_config

runner = CliRunner()


@pytest.mark.xdist_group("prefect")
def test_backfill_is_idempotent(tmp_path: Path, prefect_server, shared_tree: Path) -> None:
    config = write_config(tmp_path / "p.yaml", sources=[str(shared_tree / "b200_sxm" / "kda")], models=["kimi-k3"],
                          warehouse=tmp_path / "wh", out=tmp_path / "out", stages=["ingest", "ledger", "publish"])
    assert runner.invoke(app, ["run", "--config", str(config), "--json"]).exit_code == 0
    wh = Warehouse(tmp_path / "wh")
    versions = {n: wh.table_version(n) for n in ("ledger_cells", "ledger_events")}
    args = ["backfill", "--since", "2000-01-01", "--systems", "b200_sxm", "--models", "kimi-k3",
            "--config", str(config), "--json"]
    for _ in range(2):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        payload = json.loads(result.stdout.strip().splitlines()[-1])
        assert payload["ingest"]["backfill"] == {"since": "2000-01-01", "until": None, "systems": ["b200_sxm"],
                                                 "batches": 2, "events": 0}
        assert {n: wh.table_version(n) for n in versions} == versions
    empty = runner.invoke(app, ["backfill", "--since", "2000-01-01", "--until", "2000-12-31", "--config", str(config), "--json"])
    assert json.loads(empty.stdout.strip().splitlines()[-1])["ingest"]["backfill"]["batches"] == 0
    bad = runner.invoke(app, ["backfill", "--since", "yesterday", "--config", str(config)])
    assert bad.exit_code == 2 and "--since 'yesterday'" in bad.output
