"""Content-addressed batches: identical content is a no-op, changed content is a new table version."""

from __future__ import annotations

from pathlib import Path

from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.store import Warehouse
from tests.warehouse.conftest import GEMM_HEADER, H200_VLLM, gemm_frame, gemm_line, snapshot, write_staging, write_tree_table


def test_identical_content_is_a_no_op(tmp_path: Path, warehouse: Warehouse) -> None:
    folder = write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, [gemm_line(1), gemm_line(2)], batch=H200_VLLM)
    assert ingest([str(folder)], warehouse).new_batches == 1
    before = snapshot(warehouse)
    again = ingest([str(folder)], warehouse)
    assert (again.batches, again.new_batches, again.rows_accepted) == (1, 0, 0)
    assert snapshot(warehouse) == before


def test_changed_content_replaces_the_slice_and_time_travel_sees_the_old_one(tmp_path: Path, warehouse: Warehouse) -> None:
    tree = tmp_path / "tree"
    write_tree_table(tree, "h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet", gemm_frame([1, 2, 3]))
    write_tree_table(tree, "h100_sxm/gemm/sglang/0.5.14/gemm_perf.parquet", gemm_frame([8]))
    ingest([str(tree)], warehouse)
    first_version = warehouse.table_version("gemm_perf", curated=True)
    write_tree_table(tree, "h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet", gemm_frame([1, 2], [0.5, 0.6]))
    report = ingest([str(tree)], warehouse)
    assert (report.batches, report.new_batches) == (2, 1)
    now = warehouse.read_curated("gemm_perf", system="h200_sxm")
    assert now.sort("m")["latency"].to_list() == [0.5, 0.6]
    assert warehouse.read_curated("gemm_perf", system="h100_sxm")["m"].to_list() == [8]
    assert warehouse.read_curated("gemm_perf", system="h200_sxm", as_of=first_version).height == 3
    assert warehouse.read_table("batches").height == 3


def test_folder_version_is_authoritative_and_row_version_kept(tmp_path: Path, warehouse: Warehouse) -> None:
    write_tree_table(tmp_path / "tree", "h200_sxm/gemm/sglang/0.5.16/gemm_perf.parquet", gemm_frame([1]))
    ingest([str(tmp_path / "tree")], warehouse)
    row = warehouse.read_curated("gemm_perf").row(0, named=True)
    assert (row["version"], row["row_version"], row["framework"], row["family"]) == ("0.5.16", "0.5.14", "sglang", "gemm")
    assert row["source_file"] == "h200_sxm/gemm/sglang/0.5.16/gemm_perf.parquet" and row["source_row"] == 0
