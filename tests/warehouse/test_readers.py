"""Staging CSV and Parquet readers: dialect, line numbers, header drift, unusable files."""

from __future__ import annotations

import string
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfledger.warehouse.readers import ROW_INDEX, SourceFileError, read_parquet, read_staging_csv
from tests.warehouse.conftest import GEMM_HEADER, gemm_line


def test_real_staging_files_parse_with_every_line_accounted(shared_campaign: Path) -> None:
    for path in sorted(shared_campaign.glob("*/*_perf.txt")):
        raw = read_staging_csv(path)
        data_lines = sum(1 for line in path.read_text().splitlines()[1:] if line.strip())
        assert raw.frame.height + len(raw.rejects) == data_lines, path
        assert raw.frame[ROW_INDEX].to_list()[:1] == [2]


def test_truncated_last_line_becomes_a_reject_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "gemm_perf.txt"
    path.write_text("\n".join([GEMM_HEADER, gemm_line(1), gemm_line(2), "vLLM,0.20.0,NVIDIA H200,gemm,vllm_cut"]))
    raw = read_staging_csv(path)
    assert raw.frame.height == 2
    assert raw.rejects[0]["line"] == 4 and raw.rejects[0]["check"] == "field_count"


def test_reordered_repeated_header_remaps_columns_by_name(tmp_path: Path) -> None:
    reordered = "framework,version,device,op_name,kernel_source,gemm_dtype,k,n,m,latency"
    path = tmp_path / "gemm_perf.txt"
    path.write_text("\n".join([GEMM_HEADER, gemm_line(1), reordered, "vLLM,0.20.0,H200,gemm,ks,fp8,256,128,7,0.5"]))
    frame = read_staging_csv(path).frame
    assert frame["m"].to_list() == ["1", "7"] and frame["k"].to_list() == ["256", "256"]


def test_header_with_other_columns_mid_file_fails_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "gemm_perf.txt"
    path.write_text("\n".join([GEMM_HEADER, gemm_line(1), GEMM_HEADER + ",power", gemm_line(2) + ",300"]))
    with pytest.raises(SourceFileError, match=r"gemm_perf.txt:3: header changes mid-file \(added \['power'\]"):
        read_staging_csv(path)


@pytest.mark.parametrize("text, reason", [("", "empty file"), ("\n\n", "empty file"),
                                          (GEMM_HEADER + "\n", "a header but no rows"), ("a,a\n1,2\n", "blank or repeated")])
def test_unusable_csv_files_fail_with_reason(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "gemm_perf.txt"
    path.write_text(text)
    with pytest.raises(SourceFileError, match=reason):
        read_staging_csv(path)


def test_corrupt_and_empty_parquet_fail(tmp_path: Path) -> None:
    corrupt = tmp_path / "gemm_perf.parquet"
    corrupt.write_bytes(b"PAR1" + b"\x00" * 64)
    with pytest.raises(SourceFileError, match="corrupt or unreadable Parquet"):
        read_parquet(corrupt)
    empty = tmp_path / "moe_perf.parquet"
    pl.DataFrame({"latency": pl.Series([], dtype=pl.Float64)}).write_parquet(empty)
    with pytest.raises(SourceFileError, match="empty file"):
        read_parquet(empty)


cell = st.text(alphabet=string.ascii_letters + string.digits + " .-_\"',", min_size=0, max_size=8)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(cell, min_size=3, max_size=3), min_size=1, max_size=20),
       cut=st.integers(min_value=0, max_value=2))
def test_csv_round_trip_and_field_count_rejects(tmp_path_factory, rows: list[list[str]], cut: int) -> None:
    """Any values the csv module can quote come back unchanged; a short row is rejected at its line."""
    import csv

    path = tmp_path_factory.mktemp("csv") / "x_perf.txt"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["framework", "b", "latency"])
        writer.writerows(rows)
        writer.writerow(["x"] * cut)  # a row with too few fields (or a blank line when cut == 0)
    raw = read_staging_csv(path) if any(any(c.strip() for c in r) for r in rows) or cut else None
    if raw is None:
        return
    kept = [r for r in rows if any(c.strip() for c in r) and not (r[0].strip() == "framework")]
    expected = [[c.strip() or None for c in r] for r in kept]
    assert [list(t) for t in raw.frame.select("framework", "b", "latency").iter_rows()] == expected
    assert len(raw.rejects) == (1 if cut else 0)
    if cut:
        assert raw.rejects[0]["line"] == len(rows) + 2
