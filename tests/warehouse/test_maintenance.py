"""`perfledger versions`, `diff --from` out of range, and `perfledger maintain` on a real warehouse."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.store import Warehouse

GEMM = Path("h200_sxm") / "gemm" / "vllm" / "0.22.0"


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def twice_written(tmp_path: Path, shared_tree: Path) -> Warehouse:
    """gemm 0.22.0 ingested, then replaced by a changed copy: version 1 leaves version 0's file unreferenced."""
    wh = Warehouse(tmp_path / "wh")
    first = ingest([str(shared_tree / GEMM)], wh)
    changed = tmp_path / "tree" / GEMM
    changed.mkdir(parents=True)
    pl.read_parquet(shared_tree / GEMM / "gemm_perf.parquet").head(50).write_parquet(changed / "gemm_perf.parquet")
    second = ingest([str(changed)], wh)
    wh.batch_ids = first.batch_ids + second.batch_ids  # type: ignore[attr-defined]
    return wh


def test_versions_name_the_batch_that_made_each(twice_written: Warehouse) -> None:
    result = cli("versions", "gemm_perf", "--warehouse", str(twice_written.root), "--json")
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)["versions"]
    assert [v["version"] for v in listed] == [0, 1]
    assert [v["batches"] for v in listed] == [[b] for b in twice_written.batch_ids]
    assert all(v["operation"] == "ingest" and v["timestamp"].startswith("20") for v in listed)
    human = cli("versions", "gemm_perf", "--warehouse", str(twice_written.root))
    assert twice_written.batch_ids[1] in human.output.splitlines()[1]
    missing = cli("versions", "gemm_nope", "--warehouse", str(twice_written.root), "--json")
    assert missing.exit_code == 1 and "no table 'gemm_nope'" in json.loads(missing.stdout)["error"]


def test_diff_from_a_version_out_of_range_names_the_range(twice_written: Warehouse) -> None:
    result = cli("diff", "gemm_perf", "--from", "7", "--warehouse", str(twice_written.root))
    assert result.exit_code == 1
    assert "gemm_perf: no version 7; valid versions are 0..1" in result.output and "Traceback" not in result.output
    ok = cli("diff", "gemm_perf", "--from", "0", "--warehouse", str(twice_written.root), "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["removed"] > 0


def test_maintain_dry_run_lists_then_vacuum_removes(twice_written: Warehouse) -> None:
    root = str(twice_written.root)
    files_before = sorted(p for p in twice_written.root.rglob("*.parquet"))
    dry = cli("maintain", "--vacuum", "--retain-days", "0", "--optimize", "--dry-run", "--warehouse", root, "--json")
    assert dry.exit_code == 0, dry.output
    planned = {t["table"]: t for t in json.loads(dry.stdout)["tables"]}
    assert {"curated/gemm_perf", "batches", "file_layouts", "sidecars"} <= set(planned)
    doomed = planned["curated/gemm_perf"]["vacuum"]["files"]
    assert len(doomed) == 1 and planned["batches"]["optimize"]["files"] == 2
    assert sorted(twice_written.root.rglob("*.parquet")) == files_before  # a dry run changes nothing
    done = cli("maintain", "--vacuum", "--retain-days", "0", "--optimize", "--checkpoint", "--warehouse", root, "--json")
    assert done.exit_code == 0, done.output
    tables = {t["table"]: t for t in json.loads(done.stdout)["tables"]}
    assert tables["curated/gemm_perf"]["vacuum"]["files"] == doomed
    assert not (twice_written.root / "curated" / "gemm_perf" / doomed[0]).exists()
    assert tables["batches"]["optimize"]["done"] and tables["batches"]["checkpoint"]["done"]
    assert twice_written.read_table("batches").height == 2  # compaction keeps every row
    assert twice_written.read_curated("gemm_perf").height == 50
    # Nothing left to do the second time.
    again = json.loads(cli("maintain", "--vacuum", "--retain-days", "0", "--dry-run", "--warehouse", root, "--json").stdout)
    assert all(t["vacuum"]["count"] == 0 for t in again["tables"] if t["table"] != "batches")


def test_maintain_refuses_an_empty_plan_and_an_empty_warehouse(tmp_path: Path) -> None:
    assert cli("maintain", "--warehouse", str(tmp_path)).exit_code == 2
    empty = cli("maintain", "--checkpoint", "--warehouse", str(tmp_path / "none"), "--json")
    assert empty.exit_code == 1 and "holds no tables" in json.loads(empty.stdout)["error"]
    negative = cli("maintain", "--vacuum", "--retain-days", "-1", "--warehouse", str(tmp_path))
    assert negative.exit_code == 2 and "--retain-days" in negative.output
