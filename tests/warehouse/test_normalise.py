"""Normalisation rules on small frames: names, types, units, labels, lineage, repeats."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from perfledger.schemas.catalog import load_catalog
from perfledger.warehouse.normalise import Lineage, normalise_table, split_repeats
from perfledger.warehouse.readers import ROW_INDEX, RawFile

CATALOG = load_catalog()


def _lineage(family: str, backend: str = "sglang") -> Lineage:
    return Lineage("b1", "h200_sxm", family, backend, "0.5.12", "x.parquet", datetime(2026, 1, 1, tzinfo=UTC))


def _raw(frame: pl.DataFrame) -> RawFile:
    return RawFile(frame.with_row_index(ROW_INDEX).with_columns(pl.col(ROW_INDEX).cast(pl.Int64)), [], "parquet")


def test_microsecond_metrics_get_millisecond_twins_and_originals_stay() -> None:
    frame = pl.DataFrame({"framework": ["sglang"], "version": ["0.5.12"], "device": ["H200"], "op_name": ["ll"],
                          "node_num": [1], "kernel_source": ["deepep"], "hidden_size": [7168], "num_token": [8],
                          "num_topk": [8], "num_experts": [256], "combine_avg_t_us": [50.0],
                          "combine_bandwidth_gbps": [10.0], "dispatch_avg_t_us": [25.0], "dispatch_bandwidth_gbps": [9.0]})
    out = normalise_table(_raw(frame), CATALOG.table("wideep_deepep_ll_perf"), CATALOG, _lineage("comm")).curated
    assert out.select("combine_avg_t_us", "combine_avg_t_ms", "dispatch_avg_t_ms").row(0) == (50.0, 0.05, 0.025)


def test_custom_allreduce_backend_column_is_renamed_and_framework_labels_unified() -> None:
    frame = pl.DataFrame({"framework": ["TRTLLM", "SGLang"], "version": ["1.2.0rc6", "0.5.12"], "device": ["H200"] * 2,
                          "op_name": ["all_reduce"] * 2, "kernel_source": ["a", "b"], "allreduce_dtype": ["bfloat16"] * 2,
                          "num_gpus": [2, 2], "message_size": [128, 128], "latency": [0.01, 0.02],
                          "backend": ["sglang_graph", "sglang_eager"]})
    out = normalise_table(_raw(frame), CATALOG.table("custom_allreduce_perf"), CATALOG, _lineage("comm")).curated
    assert out["impl_backend"].to_list() == ["sglang_graph", "sglang_eager"]
    assert out["framework"].to_list() == ["trtllm", "sglang"] and out["backend"].to_list() == ["sglang", "sglang"]
    assert out["row_version"].to_list() == ["1.2.0rc6", "0.5.12"] and out["version"].unique().to_list() == ["0.5.12"]


def test_legacy_nccl_without_descriptive_columns_is_accepted() -> None:
    frame = pl.DataFrame({"op_name": ["all_gather"], "kernel_source": ["nccl"], "nccl_dtype": ["half"], "num_gpus": [8],
                          "message_size": [1024], "latency": [0.03]})
    out = normalise_table(_raw(frame), CATALOG.table("nccl_perf"), CATALOG, _lineage("comm", "nccl")).curated
    assert out.select("framework", "row_version", "device").row(0) == ("nccl", None, None)


keys = st.lists(st.tuples(st.integers(1, 4), st.floats(0.01, 10.0)), min_size=1, max_size=30)


@settings(max_examples=80, deadline=None)
@given(rows=keys)
def test_repeats_keep_the_first_measurement_and_lose_nothing(rows: list[tuple[int, float]]) -> None:
    frame = pl.DataFrame({"op_name": ["gemm"] * len(rows), "kernel_source": ["k"] * len(rows),
                          "gemm_dtype": ["fp8"] * len(rows), "m": [m for m, _ in rows], "n": [1] * len(rows),
                          "k": [1] * len(rows), "latency": [lat for _, lat in rows],
                          "source_row": list(range(len(rows)))})
    first, repeats = split_repeats(frame, CATALOG.table("gemm_perf"), CATALOG)
    assert first.height + repeats.height == len(rows)
    expected_first = {}
    for m, latency in rows:
        expected_first.setdefault(m, latency)
    assert dict(first.select("m", "latency").iter_rows()) == expected_first
    for m, latency, kept, spread in repeats.select("m", "latency", "kept_value", "spread_rel").iter_rows():
        assert kept == expected_first[m] and abs(spread - abs(latency - kept) / kept) < 1e-12
