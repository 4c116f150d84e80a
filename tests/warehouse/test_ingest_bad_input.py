"""Bad input: every case gets a clear error naming file/line/column, and the warehouse stays as it was
(or the row is quarantined with its reason)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.lock import WarehouseBusy, run_lock
from perfledger.warehouse.store import Warehouse
from tests.warehouse.conftest import GEMM_HEADER, H200_VLLM, gemm_frame, gemm_line, snapshot, write_staging, write_tree_table


def _ingest_ok(warehouse: Warehouse, folder: Path):
    report = ingest([str(folder)], warehouse)
    assert report.failed_batches == []
    return report


def _quarantine(warehouse: Warehouse) -> pl.DataFrame:
    return warehouse.read_table("quarantine").sort("source_row")


@pytest.mark.parametrize("latency, check", [("abc", "dtype_float64"), ("-0.5", "greater_than(0)"),
                                            ("nan", "not_nullable"), ("inf", "finite"), ("0", "greater_than(0)")])
def test_bad_latency_is_quarantined_with_its_reason(tmp_path: Path, warehouse: Warehouse, latency: str, check: str) -> None:
    folder = write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, [gemm_line(1), gemm_line(2, latency), gemm_line(3)],
                           batch=H200_VLLM)
    report = _ingest_ok(warehouse, folder)
    assert (report.rows_accepted, report.rows_quarantined) == (2, 1)
    row = _quarantine(warehouse).row(0, named=True)
    assert (row["source_row"], row["check"], row["column"], row["table"]) == (3, check, "latency", "gemm_perf")
    assert row["source_file"].endswith("gemm_perf.txt") and '"m": 2' in row["raw_row"]
    assert warehouse.read_curated("gemm_perf")["m"].to_list() == [1, 3]


def test_truncated_last_line_is_quarantined(tmp_path: Path, warehouse: Warehouse) -> None:
    lines = [gemm_line(1), gemm_line(2), "vLLM,0.20.0,NVIDIA H200,gemm"]
    report = _ingest_ok(warehouse, write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, lines, batch=H200_VLLM,
                                                 newline_at_end=False))
    assert (report.rows_accepted, report.rows_quarantined) == (2, 1)
    row = _quarantine(warehouse).row(0, named=True)
    assert (row["source_row"], row["check"]) == (4, "field_count")


def test_conflicting_repeated_keys_keep_the_first_and_record_the_spread(tmp_path: Path, warehouse: Warehouse) -> None:
    lines = [gemm_line(1, "1.0"), gemm_line(1, "3.0"), gemm_line(2, "1.0")]
    report = _ingest_ok(warehouse, write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, lines, batch=H200_VLLM))
    assert (report.rows_accepted, report.rows_duplicate) == (2, 1)
    curated = warehouse.read_curated("gemm_perf").sort("m")
    assert curated["latency"].to_list() == [1.0, 1.0]
    repeat = warehouse.read_table("duplicates").row(0, named=True)
    assert (repeat["source_row"], repeat["kept_source_row"], repeat["kept_value"], repeat["spread_rel"]) == (3, 2, 1.0, 2.0)


def _assert_batch_fails_cleanly(warehouse: Warehouse, source: Path, message: str, **identity: str) -> None:
    good = write_staging(source.parent / "good", "gemm_perf", GEMM_HEADER, [gemm_line(5)],
                         batch=H200_VLLM | {"version": "0.19.0"})
    _ingest_ok(warehouse, good)
    before = snapshot(warehouse)
    report = ingest([str(source)], warehouse, **identity)
    assert len(report.failed_batches) == 1, report.failed_batches
    assert message in report.failed_batches[0]["error"], report.failed_batches[0]["error"]
    assert snapshot(warehouse) == before


def test_header_change_mid_file_fails_the_batch(tmp_path: Path, warehouse: Warehouse) -> None:
    lines = [gemm_line(1), GEMM_HEADER + ",power", gemm_line(2) + ",300"]
    folder = write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, lines, batch=H200_VLLM)
    _assert_batch_fails_cleanly(warehouse, folder, "gemm_perf.txt:3: header changes mid-file")


def test_unknown_table_file_fails_the_batch(tmp_path: Path, warehouse: Warehouse) -> None:
    folder = write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, [gemm_line(1)], batch=H200_VLLM)
    (folder / "warp_drive_perf.txt").write_text("a,b\n1,2\n")
    _assert_batch_fails_cleanly(warehouse, folder, "unknown table 'warp_drive_perf'")


def test_empty_file_fails_the_batch(tmp_path: Path, warehouse: Warehouse) -> None:
    folder = write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, [gemm_line(1)], batch=H200_VLLM)
    (folder / "moe_perf.txt").write_text("")
    _assert_batch_fails_cleanly(warehouse, folder, "moe_perf.txt: empty file")


def test_unknown_system_fails_the_batch(tmp_path: Path, warehouse: Warehouse) -> None:
    folder = write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, [gemm_line(1)], batch=H200_VLLM | {"system": "h900_sxm"})
    _assert_batch_fails_cleanly(warehouse, folder, "unknown system 'h900_sxm'")


@pytest.mark.parametrize("flag, value", [("system", "../h200_sxm"), ("version", "0.20/../../x"), ("backend", "vllm/..")])
def test_names_with_dots_or_slashes_are_refused(tmp_path: Path, warehouse: Warehouse, flag: str, value: str) -> None:
    folder = write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, [gemm_line(1)], batch=H200_VLLM)
    _assert_batch_fails_cleanly(warehouse, folder, f"invalid {flag} name", **{flag: value})


def test_unidentifiable_collector_output_fails_and_names_what_is_missing(tmp_path: Path, warehouse: Warehouse) -> None:
    folder = write_staging(tmp_path / "results", "gemm_perf", GEMM_HEADER, [gemm_line(1)])
    _assert_batch_fails_cleanly(warehouse, folder, "cannot determine system, backend, version")


def test_corrupt_parquet_fails_the_batch(tmp_path: Path, warehouse: Warehouse) -> None:
    path = write_tree_table(tmp_path / "tree", "h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet", gemm_frame([1, 2]))
    path.write_bytes(path.read_bytes()[:40])
    _assert_batch_fails_cleanly(warehouse, tmp_path / "tree", "corrupt or unreadable Parquet")


def test_collection_meta_rows_disagreeing_with_the_file_fails_the_batch(tmp_path: Path, warehouse: Warehouse) -> None:
    meta = "schema_version: 1\ntables:\n  gemm_perf:\n    rows: 5\n    status: complete\n"
    write_tree_table(tmp_path / "tree", "h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet", gemm_frame([1, 2]), meta)
    _assert_batch_fails_cleanly(warehouse, tmp_path / "tree", "tables.gemm_perf.rows says 5, but the file holds 2 rows")


def test_table_in_the_wrong_family_folder_fails(tmp_path: Path, warehouse: Warehouse) -> None:
    write_tree_table(tmp_path / "tree", "h200_sxm/moe/sglang/0.5.14/gemm_perf.parquet", gemm_frame([1]))
    _assert_batch_fails_cleanly(warehouse, tmp_path / "tree", "belongs to family 'gemm', not 'moe'")


def test_missing_key_column_fails_naming_it(tmp_path: Path, warehouse: Warehouse) -> None:
    write_tree_table(tmp_path / "tree", "h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet", gemm_frame([1]).drop("k"))
    _assert_batch_fails_cleanly(warehouse, tmp_path / "tree", "missing column(s) ['k']")


def test_a_second_writer_gets_a_clear_busy_error(tmp_path: Path, warehouse: Warehouse) -> None:
    folder = write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, [gemm_line(1)], batch=H200_VLLM)
    with run_lock(warehouse.root):
        import perfledger.warehouse.lock as lock_module

        with pytest.raises(WarehouseBusy, match="is busy: another run holds its lock"):
            with lock_module.run_lock(warehouse.root, timeout_s=0.2):
                pass
    assert ingest([str(folder)], warehouse).new_batches == 1


@pytest.mark.parametrize("name, text, message", [
    ("collection_meta.yaml", "tables: [unclosed\n", "collection_meta.yaml: not valid YAML"),
    ("collection_meta.yaml", "- just\n- a list\n", "collection_meta.yaml: expected a mapping"),
    ("reuse.yaml", "schema_version: 1\n", "reuse.yaml: missing 'reuse:' list"),
    ("reuse.yaml", "reuse:\n- table: gemm_perf\n  from_version: 0.5.12\n", "reuse entry 1 lacks ['reason', 'approved_by']"),
])
def test_malformed_tree_sidecars_fail_the_batch(tmp_path: Path, warehouse: Warehouse, name: str, text: str, message: str) -> None:
    path = write_tree_table(tmp_path / "tree", "h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet", gemm_frame([1]))
    (path.parent / name).write_text(text)
    _assert_batch_fails_cleanly(warehouse, tmp_path / "tree", message)


@pytest.mark.parametrize("name, text, message", [
    ("batch.yaml", "system: [h200_sxm\n", "batch.yaml"),
    ("batch.yaml", "- h200_sxm\n", "expected a mapping with system, backend, version"),
    ("errors_vllm.gemm.json", "{not json", "errors_vllm.gemm.json: not valid JSON"),
    ("errors_vllm.gemm.json", '{"a": 1}', "expected a list of failure records"),
])
def test_malformed_collector_sidecars_fail_the_batch(tmp_path: Path, warehouse: Warehouse, name: str, text: str,
                                                     message: str) -> None:
    folder = write_staging(tmp_path / "h200_sxm", "gemm_perf", GEMM_HEADER, [gemm_line(1)])
    (folder / name).write_text(text)
    _assert_batch_fails_cleanly(warehouse, folder, message, backend="vllm", version="0.20.0")
