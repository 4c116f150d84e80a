"""Cross-backend channel of PerfSource.resolve: which frameworks lend which kernels, and the merge order."""

from __future__ import annotations

import polars as pl
import pytest

from perfledger import settings
from perfledger.estimator.data.cross_backend import LENDER_RANK, MANIFEST, lenders, load_manifest, manifest_path
from perfledger.estimator.data.sources import TreeSource
from perfledger.estimator.errors import NoDataError

SHARED_MANIFEST = settings.reference_catalogs_dir() / MANIFEST  # the tests' reference data is ../shared

GROUPS = (
    {"op_file": "kda_perf.parquet", "kernel_source": "conv", "tier": "shared", "frameworks": ["sglang", "vllm"]},
    {"op_file": "kda_perf.parquet", "kernel_source": "update", "tier": "absence_load_bearing", "frameworks": ["sglang", "vllm"]},
    {"op_file": "kda_perf.parquet", "kernel_source": "scan", "tier": "shared", "frameworks": ["sglang"]},
    {"op_file": "kda_perf.parquet", "kernel_source": "default", "tier": "shared_fallback", "frameworks": ["trtllm", "sglang"]},
    {"op_file": "gdn_perf.parquet", "kernel_source": "conv", "tier": "shared", "frameworks": ["sglang", "vllm"]},
)
MANIFEST_TEXT = """groups:
  - {op_file: kda_perf.parquet, kernel_source: conv, tier: shared, frameworks: [sglang, vllm]}
  - {op_file: kda_perf.parquet, kernel_source: update, tier: absence_load_bearing, frameworks: [sglang, vllm]}
  - {op_file: nccl_perf.parquet, kernel_source: nccl, tier: shared, frameworks: [sglang, vllm]}
"""


def test_lenders_follow_shared_groups_only():
    assert lenders(GROUPS, "kda_perf", "sglang") == {"trtllm": {"default"}, "vllm": {"conv"}}
    assert lenders(GROUPS, "kda_perf", "vllm") == {"sglang": {"conv"}}
    assert lenders(GROUPS, "moe_perf", "vllm") == {}


@pytest.mark.parametrize("text,message", [
    ("groups:\n  - {op_file: kda_perf.parquet, tier: shared, frameworks: [vllm]}\n", r"m.yaml: groups\[0\] lacks kernel_source"),
    ("groups: {}\n", "m.yaml: top-level 'groups' must be a list")])
def test_bad_manifest_names_file_and_group(tmp_path, text, message):
    bad = tmp_path / "m.yaml"
    bad.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_manifest(bad)


def _row(kernel: str, latency: float, batch: int = 1) -> dict:
    return {"kernel_source": kernel, "phase": "context", "d_model": 8, "d_conv": 4, "num_k_heads": 1, "head_k_dim": 2,
            "num_v_heads": 1, "head_v_dim": 2, "batch_size": batch, "seq_len": 1, "latency": latency}


@pytest.fixture()
def tree(tmp_path):
    """<tmp>/systems/{manifest, data/gpu/kda/<backend>/<version>/kda_perf.parquet}."""
    data = tmp_path / "systems" / "data"
    (tmp_path / "systems").mkdir()
    (tmp_path / "systems" / "perf_data_reuse_manifest.yaml").write_text(MANIFEST_TEXT)
    for backend, version, rows in [
            ("sglang", "0.5.0", [_row("conv", 1.0), _row("update", 1.5, 8)]),
            ("vllm", "0.1.dev5", [_row("conv", 9.0), _row("conv", 9.0, 4)]),
            ("vllm", "0.2.0", [_row("conv", 2.0), _row("conv", 3.0, 2), _row("scan", 7.0), _row("update", 5.0, 16)])]:
        folder = data / "gpu" / "kda" / backend / version
        folder.mkdir(parents=True)
        pl.DataFrame(rows).write_parquet(folder / "kda_perf.parquet")
    return TreeSource(data)


def test_manifest_sits_beside_the_tree_else_the_shared_catalog(tree, tmp_path):
    assert manifest_path(tree) == tree.root.parent / "perf_data_reuse_manifest.yaml"
    bare = tmp_path / "bare"
    bare.mkdir()
    assert manifest_path(TreeSource(bare)) == SHARED_MANIFEST


def test_own_rows_win_then_lenders_newest_first_filtered_by_kernel(tree):
    out = tree.resolve("gpu", "sglang", "0.5.0", "kda_perf").sort("batch_size")
    assert out.select("kernel_source", "batch_size", "latency").rows() == [
        ("conv", 1, 1.0), ("conv", 2, 3.0), ("conv", 4, 9.0), ("update", 8, 1.5)]  # no vllm scan / update rows
    assert out["_source_version"].to_list() == ["0.5.0", "vllm/0.2.0", "vllm/0.1.dev5", "0.5.0"]
    assert out.filter(pl.col("_source_version").str.starts_with("vllm/"))["_source_rank"].to_list() == [
        LENDER_RANK, LENDER_RANK + 1]


def test_lent_rows_stay_after_own_rows_without_dedupe(tree):
    raw = tree.resolve("gpu", "sglang", "0.5.0", "kda_perf", dedupe=False)
    assert raw.height == 6 and raw["_source_rank"].is_sorted()
    assert raw.filter(pl.col("batch_size") == 1)["latency"].to_list() == [1.0, 2.0, 9.0]


def test_a_backend_without_own_rows_answers_from_lenders_only_in_the_shared_layer(tree):
    lent = tree.resolve("gpu", "sglang", "0.4.0", "kda_perf")
    assert sorted(lent["latency"].to_list()) == [2.0, 3.0, 9.0]
    with pytest.raises(NoDataError, match=r"kda_perf rows for gpu/sglang/0\.4\.0 .*looked in 0\.4\.0\); "
                                          r"gpu/sglang holds them at 0\.5\.0$"):
        tree.resolve("gpu", "sglang", "0.4.0", "kda_perf", shared=False)  # EMPIRICAL / SOL: own version only
    with pytest.raises(NoDataError, match=r"and the reuse manifest's lenders\)$"):  # no trtllm version holds any
        tree.resolve("gpu", "trtllm", "1.0", "kda_perf")  # trtllm is in no lending group


def test_tables_outside_the_shared_layer_borrow_nothing(tree):
    with pytest.raises(NoDataError, match="nccl_perf"):  # tables.yaml: nccl_perf shared_layer false
        tree.resolve("gpu", "sglang", "0.5.0", "nccl_perf")
