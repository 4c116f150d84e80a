"""Backfills: the collection-date window (pure), and an idempotent re-derivation through the CLI."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from perfledger.flows.backfill import BackfillError, collection_dates, parse_day, window_batches
from perfledger.cli import app
from tests.flows.conftest import write_config
from perfledger.warehouse.store import Warehouse

runner = CliRunner()
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def _frames():
    batches = pl.DataFrame({"batch_id": ["a", "b", "c"], "system": ["h200_sxm", "b200_sxm", "h200_sxm"],
                            "started_at": [T0, T0, T0]})
    tables = pl.DataFrame({"batch_id": ["a", "a", "b"], "meta_collected_at": ["2026-01-10T08:00:00Z", "2026-01-05", None]})
    return batches, tables


def test_collection_date_prefers_collection_meta_then_ingest_day() -> None:
    dates = collection_dates(*_frames())
    assert dict(zip(dates["batch_id"], dates["collected"])) == {
        "a": date(2026, 1, 5), "b": date(2026, 3, 1), "c": date(2026, 3, 1)}


def test_window_bounds_are_inclusive_and_systems_filter() -> None:
    dates = collection_dates(*_frames())
    assert window_batches(dates, date(2026, 1, 5), date(2026, 1, 5), None) == ["a"]
    assert window_batches(dates, date(2026, 1, 6), None, None) == ["b", "c"]
    assert window_batches(dates, date(2026, 1, 1), None, ["h200_sxm"]) == ["a", "c"]
    assert window_batches(dates, date(2027, 1, 1), None, None) == []


def test_bad_dates_name_the_flag() -> None:
    with pytest.raises(BackfillError, match=r"--since '2026-13-01': expected a date"):
        parse_day("2026-13-01", "--since")


@pytest.mark.xdist_group("prefect")
def test_backfill_is_idempotent(tmp_path: Path, prefect_server, shared_tree: Path) -> None:
    config = write_config(tmp_path / "p.yaml", sources=[str(shared_tree / "b200_sxm" / "kda")], models=["kimi-k3"],
                          warehouse=tmp_path / "wh", out=tmp_path / "out", stages=["ingest", "ledger", "publish"])
    assert runner.invoke(app, ["run", "--config", str(config), "--json"]).exit_code == 0
    wh = Warehouse(tmp_path / "wh")
    versions = {n: wh.table_version(n) for n in ("ledger_cells", "ledger_events")}
    args = ["backfill", "--since", "2000-01-01", "--systems", "b200_sxm", "--models", "kimi-k3", "--config", str(config), "--json"]
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
