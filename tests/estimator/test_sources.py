"""PerfSource resolution over ../shared: own version, reuse.yaml donors, earlier versions, first wins."""

from __future__ import annotations

import polars as pl
import pytest

from perfledger.estimator.data.sources import TreeSource
from perfledger.estimator.errors import NoDataError
from tests.estimator.conftest import SHARED_DATA


def test_reuse_only_version_answers_from_donor():
    src = TreeSource(SHARED_DATA)
    donors = src.reuse_donors("h200_sxm", "quantize", "trtllm", "1.3.0rc15")
    assert donors["computescale_perf"] == "1.3.0rc10"


def test_own_version_rows_win_over_earlier_versions():
    src = TreeSource(SHARED_DATA)
    own = src.read("h200_sxm", "trtllm", "1.3.0rc20", "gemm_perf")
    merged = src.resolve("h200_sxm", "trtllm", "1.3.0rc20", "gemm_perf", shared=True)
    assert merged.height >= own.unique(subset=["gemm_dtype", "m", "n", "k"]).height
    from perfledger.versions import version_key

    assert all(version_key(v) <= version_key("1.3.0rc20") for v in merged["_source_version"].unique())
    first = merged.filter(pl.col("_source_rank") == 0)
    assert first.height == own.unique(subset=["gemm_dtype", "m", "n", "k"]).height
    assert merged.select(pl.struct("gemm_dtype", "m", "n", "k").is_unique().all()).item()


def test_reuse_only_gemm_version_reads_earlier_versions():
    src = TreeSource(SHARED_DATA)
    merged = src.resolve("h200_sxm", "trtllm", "1.3.0rc15", "gemm_perf", shared=True)
    assert merged.height and "1.3.0rc15" not in set(merged["_source_version"])
    with pytest.raises(NoDataError, match="1.3.0rc15"):
        src.resolve("h200_sxm", "trtllm", "1.3.0rc15", "gemm_perf", shared=False)


def test_bad_reuse_yaml_names_file_and_entry(tmp_path):
    d = tmp_path / "sys" / "gemm" / "trtllm" / "1.0"
    d.mkdir(parents=True)
    (d / "reuse.yaml").write_text("reuse:\n- {table: gemm_perf}\n")
    with pytest.raises(ValueError, match=r"reuse\.yaml: reuse\[0\] needs keys"):
        TreeSource(tmp_path).reuse_donors("sys", "gemm", "trtllm", "1.0")


def test_missing_root_is_typed_error(tmp_path):
    with pytest.raises(NoDataError, match="not a directory"):
        TreeSource(tmp_path / "absent")


def _tree_with(tmp_path, table: str, frame: pl.DataFrame):
    d = tmp_path / "sys" / "attention" / "vllm" / "1.0"
    d.mkdir(parents=True)
    frame.write_parquet(d / f"{table}.parquet")
    return TreeSource(tmp_path)


GEN_ROW = {"kv_cache_dtype": ["bfloat16"], "head_dim": [128], "num_key_value_heads": [8], "num_heads": [32],
           "batch_size": [1], "step": [10], "latency": [0.1]}


def test_declared_column_default_fills_a_file_lacking_it(tmp_path):
    """tables.yaml column_defaults: a generation_attention_perf file without window_size reads as window 0."""
    src = _tree_with(tmp_path, "generation_attention_perf", pl.DataFrame(GEN_ROW))
    rows = src.resolve("sys", "vllm", "1.0", "generation_attention_perf")
    assert rows["window_size"].to_list() == [0]


def test_missing_key_column_without_default_is_typed_error_naming_it(tmp_path):
    src = _tree_with(tmp_path, "generation_attention_perf", pl.DataFrame(GEN_ROW).drop("num_heads"))
    with pytest.raises(NoDataError, match=r"generation_attention_perf rows for sys/vllm/1\.0 lack key column\(s\) num_heads"):
        src.resolve("sys", "vllm", "1.0", "generation_attention_perf", dedupe=False)


def test_every_wheel_table_has_its_key_columns_after_defaults(aic_core):
    """Scan of the wheel's perf tree: each catalogued table, once column_defaults apply, carries all its key columns
    (the ops filter on them; a100_sxm sglang 0.5.10 / vllm 0.14.0 attention files lack window_size)."""
    import pyarrow.parquet as pq

    from perfledger import settings
    from perfledger.estimator.data.sources import table_catalog

    root = settings.aic_package_dir() / "systems"
    assert (root / "data").is_dir(), f"the installed wheel has no systems/data: {root}"
    lacking, defaulted = [], set()
    for table, info in table_catalog().items():
        for path in (root / "data").glob(f"*/*/*/*/{table}.parquet"):
            missing = set(info["keys"]) - set(pq.read_schema(path).names)
            defaulted |= {(table, c) for c in missing & set(info.get("column_defaults") or {})}
            if missing - set(info.get("column_defaults") or {}):
                lacking.append((str(path), sorted(missing)))
    assert not lacking
    assert {("context_attention_perf", "window_size"), ("generation_attention_perf", "window_size")} <= defaulted


def test_column_default_fills_nulls_of_a_unioned_table():
    """The warehouse unions files with and without window_size: its null rows take the declared default."""
    from perfledger.estimator.data.sources import complete_columns

    frame = pl.DataFrame({**GEN_ROW, "window_size": [None]}, schema_overrides={"window_size": pl.Int64})
    assert complete_columns(frame, "generation_attention_perf", "sys/vllm/1.0")["window_size"].to_list() == [0]
    kept = pl.DataFrame({**GEN_ROW, "window_size": [512]})
    assert complete_columns(kept, "generation_attention_perf", "sys/vllm/1.0")["window_size"].to_list() == [512]
