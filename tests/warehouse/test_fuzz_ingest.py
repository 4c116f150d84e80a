"""Fuzzing the input layer: any staging CSV, Parquet column or sidecar is accepted, quarantined row by row,
or fails its batch with one clear line; never a traceback, never a changed warehouse on failure."""

from __future__ import annotations

import json
import shutil
import string
from pathlib import Path

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfledger.safe_io import InputFileError, load_json, load_yaml
from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.store import Warehouse
from tests.warehouse.conftest import GEMM_HEADER, H200_VLLM, gemm_frame, gemm_line, snapshot, write_staging

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SIDECARS = ("batch.yaml", "collection_meta.yaml", "errors_vllm.gemm.json", "collector_checkpoint/vllm/vllm.gemm.json")

field_text = st.text(alphabet=string.printable + "\ufeff\u00e9\x00", max_size=12)
csv_line = st.lists(field_text, min_size=0, max_size=12).map(",".join)
line_end = st.sampled_from(["\n", "\r\n", "\r"])
raw_bytes = st.binary(max_size=200)


def _committed_or_clean(root: Path, report, before) -> None:
    """A failed batch is one line and leaves the warehouse as it was; an accepted one accounts for its rows."""
    for failure in report.failed_batches:
        assert "\n" not in failure["error"] and "Traceback" not in failure["error"]
    if report.failed_batches:
        assert snapshot(Warehouse(root)) == before
    else:
        assert report.rows_accepted + report.rows_quarantined + report.rows_duplicate >= 1


def _baseline(tmp: Path) -> tuple[Path, dict]:
    root = tmp / "wh"
    good = write_staging(tmp / "good", "gemm_perf", GEMM_HEADER, [gemm_line(5)], batch=H200_VLLM | {"version": "0.19.0"})
    ingest([str(good)], Warehouse(root))
    return root, snapshot(Warehouse(root))


@FUZZ
@given(lines=st.lists(st.one_of(csv_line, st.just(GEMM_HEADER), st.just(gemm_line(1)),
                                st.just("version,framework,device,op_name,kernel_source,gemm_dtype,m,n,k,latency")),
                      max_size=8), end=line_end, bom=st.booleans(), header=st.booleans())
def test_any_staging_csv_is_accepted_quarantined_or_refused_cleanly(tmp_path_factory, lines, end, bom, header) -> None:
    tmp = tmp_path_factory.mktemp("csv")
    root, before = _baseline(tmp)
    text = ("\ufeff" if bom else "") + end.join(([GEMM_HEADER] if header else []) + lines) + end
    folder = tmp / "out"
    folder.mkdir()
    (folder / "gemm_perf.txt").write_text(text, newline="")
    (folder / "batch.yaml").write_text("system: h200_sxm\nbackend: vllm\nversion: 0.20.0\n")
    _committed_or_clean(root, ingest([str(folder)], Warehouse(root)), before)


parquet_values = st.one_of(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=2, max_size=2).map(pl.Series),
    st.lists(st.integers(-2**63, 2**63 - 1), min_size=2, max_size=2).map(lambda v: pl.Series(v, dtype=pl.Int64)),
    st.lists(st.booleans(), min_size=2, max_size=2).map(pl.Series),
    st.lists(st.text(max_size=6), min_size=2, max_size=2).map(pl.Series),
    st.lists(st.none(), min_size=2, max_size=2).map(lambda v: pl.Series(v, dtype=pl.Null)),
    st.lists(st.lists(st.integers(0, 3), max_size=2), min_size=2, max_size=2).map(pl.Series),
)


@FUZZ
@given(column=st.sampled_from(["m", "n", "latency", "framework", "version", "extra", "system", "batch_id"]),
       values=parquet_values)
def test_any_parquet_column_type_is_cast_losslessly_or_quarantined(tmp_path_factory, column, values) -> None:
    tmp = tmp_path_factory.mktemp("parquet")
    root, before = _baseline(tmp)
    path = tmp / "tree" / "h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet"
    path.parent.mkdir(parents=True)
    gemm_frame([1, 2]).with_columns(values.alias(column)).write_parquet(path)
    report = ingest([str(tmp / "tree")], Warehouse(root))
    _committed_or_clean(root, report, before)
    if not report.failed_batches and column in ("m", "n") and values.dtype.is_numeric():
        curated = Warehouse(root).read_curated("gemm_perf", version="0.5.14")[column].to_list()
        assert set(curated) <= set(values.to_list())  # a kept key is the stored value, never a truncation


@FUZZ
@given(name=st.sampled_from(SIDECARS), content=st.one_of(raw_bytes, st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=12).map(lambda doc: json.dumps(doc).encode())))
def test_any_sidecar_is_read_or_fails_the_batch_cleanly(tmp_path_factory, name, content) -> None:
    tmp = tmp_path_factory.mktemp("sidecar")
    root, before = _baseline(tmp)
    folder = write_staging(tmp / "h200_sxm", "gemm_perf", GEMM_HEADER, [gemm_line(1)])
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(content)
    _committed_or_clean(root, ingest([str(folder)], Warehouse(root), backend="vllm", version="0.20.0"), before)
    shutil.rmtree(tmp)


@settings(max_examples=150, deadline=None)
@given(content=st.one_of(raw_bytes, st.text(alphabet="[]{}:,-&*! \n'\"ab1.", max_size=80).map(str.encode)))
def test_the_loaders_return_data_or_one_clear_error(tmp_path_factory, content) -> None:
    path = tmp_path_factory.mktemp("load") / "doc"
    path.write_bytes(content)
    for loader in (load_yaml, load_json):
        try:
            loader(path)
        except InputFileError as exc:
            assert str(exc).startswith(str(path)) and "\n" not in str(exc)
