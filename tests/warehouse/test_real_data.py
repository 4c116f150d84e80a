"""Real data: ../shared's tree and campaign, and the whole wheel. Every file row is accounted for."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from perfledger.warehouse.discover import aic_package_root
from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.inventory import curated_inventory
from perfledger.warehouse.store import Warehouse

pytestmark = pytest.mark.xdist_group("real-data")


def footer_rows(root: Path) -> Counter:
    rows: Counter = Counter()
    for path in root.glob("*/*/*/*/*.parquet"):
        rows[path.stem] += pq.read_metadata(path).num_rows
    return rows


def accounted_rows(report) -> Counter:
    return Counter(report.tables)


@pytest.fixture(scope="module")
def shared_warehouse(tmp_path_factory, shared_tree: Path):
    warehouse = Warehouse(tmp_path_factory.mktemp("shared") / "wh")
    return warehouse, ingest([str(shared_tree)], warehouse)


def test_shared_tree_every_row_is_curated_quarantined_or_a_repeat(shared_warehouse, shared_tree: Path) -> None:
    warehouse, report = shared_warehouse
    assert report.failed_batches == [] and report.rows_quarantined == 0
    expected = footer_rows(shared_tree)
    duplicates = warehouse.read_table("duplicates").group_by("table").len()
    repeats = dict(duplicates.iter_rows())
    for table, rows in expected.items():
        assert report.tables[table] + repeats.get(table, 0) == rows, table
    assert len(expected) == 44


def test_shared_tree_quirks_are_normalised(shared_warehouse) -> None:
    warehouse, _ = shared_warehouse
    moe = warehouse.read_curated("moe_perf", system="b200_sxm", backend="vllm", version="0.24.0")
    assert moe.height and moe["row_version"].str.starts_with("0.1.dev19262").any()
    nccl = warehouse.read_curated("nccl_perf", system="h200_sxm", backend="nccl", version="2.23")
    assert nccl.height and nccl["framework"].unique().to_list() == ["nccl"]
    deepep = warehouse.read_curated("wideep_deepep_ll_perf")
    assert (deepep["dispatch_avg_t_ms"] * 1000 - deepep["dispatch_avg_t_us"]).abs().max() < 1e-9
    frameworks = set(warehouse.read_curated_columns("gemm_perf", ["framework"])["framework"].unique())
    assert frameworks <= {"sglang", "vllm", "trtllm"}


def test_shared_tree_reuse_and_batch_meta_are_recorded(shared_warehouse) -> None:
    warehouse, report = shared_warehouse
    reuse = warehouse.read_table("reuse")
    assert reuse.height > 0 and set(reuse.columns) >= {"table", "from_version", "reason", "approved_by"}
    tables = warehouse.read_table("batch_tables")
    partial = tables.filter(pl.col("meta_status") == "partial")
    assert partial.filter((pl.col("system") == "gb300") & (pl.col("version") == "0.14.0")).height >= 1
    assert warehouse.read_table("batches").height == report.new_batches


def test_campaign_staging_output_ingests_with_identity_from_folder_names(tmp_path: Path, shared_campaign: Path) -> None:
    warehouse = Warehouse(tmp_path / "wh")
    report = ingest([str(shared_campaign)], warehouse)
    assert report.failed_batches == [] and report.new_batches == 5
    data_rows = sum(sum(1 for line in p.read_text().splitlines()[1:] if line.strip())
                    for p in shared_campaign.glob("*/*_perf.txt"))
    assert report.rows_accepted + report.rows_quarantined + report.rows_duplicate == data_rows
    inventory = curated_inventory(warehouse)
    assert {e["system"] for e in inventory} == {"a100_sxm", "gb200", "gb300", "h100_sxm", "h200_sxm"}
    assert {(e["backend"], e["version"]) for e in inventory} == {("vllm", "0.20.0")}
    assert warehouse.read_table("batches")["failed_cases"].sum() >= 0


@pytest.mark.slow
def test_whole_wheel_ingests_with_every_row_accounted_for_and_reingest_is_a_no_op(tmp_path: Path) -> None:
    root = aic_package_root()
    warehouse = Warehouse(tmp_path / "wh")
    report = ingest(["aic-package"], warehouse)
    expected = footer_rows(root)
    assert sum(expected.values()) > 12_000_000 and len(list(root.glob("*/*/*/*/*.parquet"))) == 736
    repeats = dict(warehouse.read_table("duplicates").group_by("table").len().iter_rows())
    quarantined = dict(warehouse.read_table("quarantine").group_by("table").agg(pl.col("source_row").n_unique()).iter_rows())
    for table, rows in expected.items():
        assert report.tables[table] + repeats.get(table, 0) + quarantined.get(table, 0) == rows, table
    again = ingest(["aic-package"], warehouse)
    assert again.new_batches == 0 and again.batches == report.batches


def test_collector_failures_from_real_checkpoints_are_kept(tmp_path: Path, shared_campaign: Path) -> None:
    warehouse = Warehouse(tmp_path / "wh")
    ingest([str(shared_campaign / "h200_sxm")], warehouse)
    failures = warehouse.read_table("collection_failures")
    import json

    expected = sum(len(json.loads(p.read_text()).get("failed", []))
                   for p in (shared_campaign / "h200_sxm" / "collector_checkpoint").glob("*/*.json"))
    assert failures.height == expected
    assert warehouse.read_table("batches")["failed_cases"].to_list() == [expected]
