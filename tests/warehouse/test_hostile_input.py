"""Hostile and messy input: every case is accepted, quarantined with its reason, or fails its batch with
one clear line naming file[:line[:column]]; a failed batch never changes the warehouse."""

from __future__ import annotations

import os
import signal
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.lock import WarehouseUnwritable, run_lock
from perfledger.warehouse.store import Warehouse
from tests.warehouse.conftest import GEMM_HEADER, H200_VLLM, gemm_frame, gemm_line, snapshot, write_staging, write_tree_table

GEMM_SLICE = "h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet"


def _fails_cleanly(warehouse: Warehouse, sources: list[Path], message: str, **identity: str) -> str:
    good = write_staging(sources[0].parent / "good", "gemm_perf", GEMM_HEADER, [gemm_line(5)],
                         batch=H200_VLLM | {"version": "0.19.0"})
    assert ingest([str(good)], warehouse).failed_batches == []
    before = snapshot(warehouse), warehouse.read_curated("gemm_perf").drop("ingested_at").rows()
    report = ingest([str(s) for s in sources], warehouse, **identity)
    errors = [f["error"] for f in report.failed_batches]
    assert len(errors) == 1 and message in errors[0], errors
    assert "\n" not in errors[0] and len(errors[0]) < 1000 and "Traceback" not in errors[0]
    assert (snapshot(warehouse), warehouse.read_curated("gemm_perf").drop("ingested_at").rows()) == before
    return errors[0]


def _staging(tmp_path: Path, text: str | bytes, name: str = "gemm_perf") -> Path:
    folder = tmp_path / "out"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.txt"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    (folder / "batch.yaml").write_text("system: h200_sxm\nbackend: vllm\nversion: 0.20.0\n")
    return folder


def _tree(tmp_path: Path, frame: pl.DataFrame, meta: str | None = None) -> Path:
    write_tree_table(tmp_path / "tree", GEMM_SLICE, frame, meta)
    return tmp_path / "tree"


# -- silent wrong data (class 2) -----------------------------------------------------------------------
@pytest.mark.parametrize("values, dtype, check", [
    ([1.0, 3.5], pl.Float64, "lossy_int64"), ([1, 2**62], pl.Int64, None)])
def test_a_cast_that_changes_a_key_quarantines_the_row(tmp_path: Path, warehouse: Warehouse, values, dtype, check) -> None:
    frame = gemm_frame([0, 0]).with_columns(pl.Series("m", values, dtype=dtype))
    report = ingest([str(_tree(tmp_path, frame))], warehouse)
    if check is None:
        assert report.rows_accepted == 2 and warehouse.read_curated("gemm_perf")["m"].to_list() == [1, 2**62]
        return
    assert (report.rows_accepted, report.rows_quarantined) == (1, 1)
    row = warehouse.read_table("quarantine").row(0, named=True)
    assert (row["check"], row["column"], row["value"], row["value_in_file"]) == (check, "m", "3.5", "3.5")
    assert warehouse.read_curated("gemm_perf")["m"].to_list() == [1]


@pytest.mark.parametrize("latency", [pl.Series([True, False]), pl.Series([datetime(2026, 1, 1)] * 2)])
def test_a_boolean_or_timestamp_latency_is_never_a_number(tmp_path: Path, warehouse: Warehouse, latency) -> None:
    report = ingest([str(_tree(tmp_path, gemm_frame([1, 2]).with_columns(latency.alias("latency"))))], warehouse)
    assert (report.rows_accepted, report.rows_quarantined) == (0, 2)
    assert "dtype_float64" in set(warehouse.read_table("quarantine")["check"])


def test_a_reordered_mid_file_header_moving_the_first_column_is_remapped(tmp_path: Path, warehouse: Warehouse) -> None:
    moved = "version,framework,device,op_name,kernel_source,gemm_dtype,m,n,k,latency"
    folder = _staging(tmp_path, "\n".join([GEMM_HEADER, gemm_line(1), moved,
                                           "0.20.0.dev1,vLLM,NVIDIA H200,gemm,vllm_cutlass,fp8,2,128,256,0.5"]) + "\n")
    assert ingest([str(folder)], warehouse).rows_accepted == 2
    curated = warehouse.read_curated("gemm_perf").sort("m")
    assert curated["framework"].to_list() == ["vllm", "vllm"] and curated["row_version"].to_list() == ["0.20.0.dev1"] * 2


@pytest.mark.parametrize("column", ["system", "backend", "batch_id", "source_row", "family", "row_version"])
def test_a_data_column_named_like_lineage_is_kept_under_another_name(tmp_path: Path, warehouse: Warehouse,
                                                                      column: str) -> None:
    frame = gemm_frame([1]).with_columns(pl.lit("from-the-file").alias(column))
    report = ingest([str(_tree(tmp_path, frame))], warehouse)
    row = warehouse.read_curated("gemm_perf").row(0, named=True)
    assert row[f"{column}_in_file"] == "from-the-file" and row[column] != "from-the-file"
    assert any(f"{column}_in_file" in w and "reserved" in w for w in report.warnings)


@pytest.mark.parametrize("flag, value", [("version", "0.20.0\n"), ("system", "h200_sxm\n"), ("version", "1" * 101)])
def test_names_must_match_whole_and_be_short(tmp_path: Path, warehouse: Warehouse, flag: str, value: str) -> None:
    folder = write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, [gemm_line(1)], batch=H200_VLLM)
    _fails_cleanly(warehouse, [folder], f"invalid {flag} name", **{flag: value})


def test_a_too_long_name_in_a_second_source_fails_only_that_batch(tmp_path: Path, warehouse: Warehouse) -> None:
    good = write_staging(tmp_path / "a", "gemm_perf", GEMM_HEADER, [gemm_line(1)], batch=H200_VLLM)
    bad = write_staging(tmp_path / "b", "gemm_perf", GEMM_HEADER, [gemm_line(2)], batch=H200_VLLM | {"version": "9" * 200})
    report = ingest([str(good), str(bad)], warehouse)
    assert report.new_batches == 1 and "invalid version name" in report.failed_batches[0]["error"]
    assert warehouse.read_table("batches").height == 1 and warehouse.read_curated("gemm_perf")["m"].to_list() == [1]


def test_batch_yaml_identities_stay_as_written(tmp_path: Path, warehouse: Warehouse) -> None:
    folder = write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, [gemm_line(1)])
    (folder / "batch.yaml").write_text("system: h200_sxm\nbackend: vllm\nversion: 0.20\n")
    ingest([str(folder)], warehouse)
    assert warehouse.read_table("batches")["version"].to_list() == ["0.20"]


# -- late sidecar failures and wrong shapes (class 1, 4) -------------------------------------------------
@pytest.mark.parametrize("name, text, message", [
    ("collector_checkpoint/vllm/vllm.gemm.json", '{"table": "gemm_perf", "failed": "abc"}', "'failed' must be a list"),
    ("errors_vllm.gemm.json", '[["gemm_perf", 1]]', "record 1: expected an object, found a list"),
    ("errors_vllm.gemm.json", '[{"table": ["gemm_perf"]}]', "record 1: table: expected a single value"),
    ("errors_vllm.gemm.json", b'[{"message": "\xff"}]', "errors_vllm.gemm.json:1:15: not UTF-8"),
    ("errors_vllm.gemm.json", "[" * 100_000 + "]" * 100_000, "errors_vllm.gemm.json: nested"),
    ("collection_meta.yaml", "tables:\n  gemm_perf:\n    rows: ten\n", "tables.gemm_perf.rows: expected a row count"),
    ("collection_meta.yaml", "tables:\n- gemm_perf\n", "'tables' must be a mapping, found a list"),
    ("collection_meta.yaml", "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefg", "bcdefgh", strict=True)),
     "expands to more than"),
    ("collection_meta.yaml", "x: " + "[" * 5000 + "]" * 5000 + "\n", "collection_meta.yaml"),
    ("batch.yaml", "system: [h200_sxm, h100_sxm]\nbackend: vllm\nversion: 0.20.0\n", "system must be a single name"),
], ids=["checkpoint-failed-text", "error-record-list", "error-field-list", "error-not-utf8", "json-deep", "meta-rows-text",
        "meta-tables-list", "yaml-alias-bomb", "yaml-deep", "batch-yaml-list"])
def test_sidecars_of_the_wrong_shape_fail_the_batch_before_any_write(tmp_path: Path, warehouse: Warehouse, name: str,
                                                                      text: str | bytes, message: str) -> None:
    folder = write_staging(tmp_path / "h200_sxm", "gemm_perf", GEMM_HEADER, [gemm_line(1)], batch=H200_VLLM)
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    _fails_cleanly(warehouse, [folder], message)


def test_reuse_entries_that_are_lists_fail_the_batch(tmp_path: Path, warehouse: Warehouse) -> None:
    tree = _tree(tmp_path, gemm_frame([1]))
    (tree / GEMM_SLICE).with_name("reuse.yaml").write_text("reuse:\n- [gemm_perf, 0.5.12]\n")
    _fails_cleanly(warehouse, [tree], "reuse entry 1 must be a mapping, found a list")


def test_list_typed_parquet_columns_fail_naming_the_column(tmp_path: Path, warehouse: Warehouse) -> None:
    tree = _tree(tmp_path, gemm_frame([1]).with_columns(pl.Series("latency", [[0.1, 0.2]])))
    _fails_cleanly(warehouse, [tree], "latency (List(Float64))")


# -- CSV dialect and size (class 4, 5) ---------------------------------------------------------------------
def test_bom_and_cr_only_line_ends_are_read(tmp_path: Path, warehouse: Warehouse) -> None:
    text = "\ufeff" + "\r".join([GEMM_HEADER, gemm_line(1), gemm_line(2)]) + "\r"
    report = ingest([str(_staging(tmp_path, text))], warehouse)
    assert (report.rows_accepted, report.failed_batches) == (2, [])


@pytest.mark.parametrize("bad_line, check", [(gemm_line(2).replace("gemm,", "ge\rmm,"), "csv_syntax"),
                                             (gemm_line(2).replace("gemm,", "g" * 10_000_000 + ","), "field_too_long")],
                         ids=["stray-cr", "10mb-field"])
def test_a_stray_cr_or_a_huge_field_quarantines_its_line(tmp_path: Path, warehouse: Warehouse, bad_line: str,
                                                         check: str) -> None:
    folder = _staging(tmp_path, "\n".join([GEMM_HEADER, gemm_line(1), bad_line, gemm_line(3)]) + "\n")
    report = ingest([str(folder)], warehouse)
    assert (report.rows_accepted, report.rows_quarantined) == (2, 1)
    row = warehouse.read_table("quarantine").row(0, named=True)
    assert (row["source_row"], row["check"]) == (3, check) and len(row["value_in_file"]) < 5000


def test_a_mid_file_header_repeating_a_column_fails_at_its_line(tmp_path: Path, warehouse: Warehouse) -> None:
    folder = _staging(tmp_path, "\n".join([GEMM_HEADER, gemm_line(1), GEMM_HEADER + ",m", gemm_line(2) + ",2"]) + "\n")
    _fails_cleanly(warehouse, [folder], "gemm_perf.txt:3: bad header")


def test_an_enormous_header_is_quoted_short(tmp_path: Path, warehouse: Warehouse) -> None:
    folder = _staging(tmp_path, "," * 5_000_000 + "\n1\n")
    message = _fails_cleanly(warehouse, [folder], "gemm_perf.txt:1: bad header")
    assert "chars)" in message


def test_non_utf8_staging_text_is_named_by_line_and_column(tmp_path: Path, warehouse: Warehouse) -> None:
    folder = _staging(tmp_path, (GEMM_HEADER + "\n" + gemm_line(1) + "\n").encode().replace(b"NVIDIA", b"NV\xe9DIA"))
    _fails_cleanly(warehouse, [folder], "gemm_perf.txt:2:20: not UTF-8 text")


def test_quarantine_keeps_the_text_in_the_file_beside_the_parsed_value(tmp_path: Path, warehouse: Warehouse) -> None:
    folder = _staging(tmp_path, "\n".join([GEMM_HEADER, gemm_line(1, "Infinity"), gemm_line(2, "0")]) + "\n")
    ingest([str(folder)], warehouse)
    rows = warehouse.read_table("quarantine").sort("source_row").select("check", "value", "value_in_file").rows()
    assert rows == [("finite", "inf", "Infinity"), ("greater_than(0)", "0.0", "0")]


# -- only regular files (class 4) -----------------------------------------------------------------------------
@pytest.fixture
def alarm():
    """A hang fails the test instead of stalling the suite."""
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("ingest hung")))
    signal.alarm(60)
    yield
    signal.alarm(0)


@pytest.mark.parametrize("make, message", [
    (lambda p: os.mkfifo(p), "a FIFO, not a regular file"),
    (lambda p: p.symlink_to("/dev/zero"), "leaves the source"),
    (lambda p: p.mkdir(), "a folder, not a regular file"),
    (lambda p: p.symlink_to(p.parent.parent / "elsewhere.txt"), "leaves the source"),
])
def test_only_regular_files_inside_the_source_are_read(tmp_path: Path, warehouse: Warehouse, alarm, make, message) -> None:
    folder = write_staging(tmp_path / "src" / "out", "gemm_perf", GEMM_HEADER, [gemm_line(1)], batch=H200_VLLM)
    (tmp_path / "src" / "elsewhere.txt").write_text(GEMM_HEADER + "\n" + gemm_line(9) + "\n")
    make(folder / "moe_perf.txt")
    _fails_cleanly(warehouse, [folder], message)


def test_a_symlink_inside_the_source_is_followed(tmp_path: Path, warehouse: Warehouse) -> None:
    folder = write_staging(tmp_path / "out", "gemm_perf", GEMM_HEADER, [gemm_line(1)], batch=H200_VLLM)
    (folder / "gemm_perf.txt").rename(folder / "gemm.csv.keep")
    (folder / "gemm_perf.txt").symlink_to(folder / "gemm.csv.keep")
    assert ingest([str(folder)], warehouse).rows_accepted == 1


def test_a_warehouse_that_cannot_take_the_lock_says_so(tmp_path: Path) -> None:
    (tmp_path / "wh").write_text("a file, not a folder")
    with pytest.raises(WarehouseUnwritable, match="cannot write warehouse"):
        with run_lock(tmp_path / "wh"):
            pass
