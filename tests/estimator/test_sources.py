"""PerfSource resolution over ../shared: own version, reuse.yaml donors, earlier versions, first wins."""

from __future__ import annotations

import polars as pl
import pytest

from estimator.errors import NoDataError
from estimator.sources import TreeSource
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
    from estimator.versions import version_key

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
