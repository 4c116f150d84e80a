"""WarehouseSource answers exactly like the public-tree reader on the same ingested data."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from perfledger.estimator.batch import estimate
from perfledger.estimator.data.sources import TreeSource, WarehouseSource
from perfledger.estimator.session import Estimator
from tests.estimator.conftest import SHARED_DATA

GEMM = SHARED_DATA / "h200_sxm" / "gemm" / "trtllm"


@pytest.fixture(scope="module")
def warehouse_root(tmp_path_factory):
    from perfledger.warehouse.ingest import ingest
    from perfledger.warehouse.store import Warehouse

    root = tmp_path_factory.mktemp("wh")
    report = ingest([str(GEMM / v) for v in ("1.2.0rc5", "1.3.0rc10", "1.3.0rc15")], Warehouse(root))
    assert not report.failed_batches, report.failed_batches
    return root


def test_reuse_declaration_comes_from_the_warehouse(warehouse_root):
    src = WarehouseSource(warehouse_root)
    assert src.reuse_donors("h200_sxm", "gemm", "trtllm", "1.3.0rc15") == {"gemm_perf": "1.3.0rc10"}
    assert src.versions("h200_sxm", "gemm", "trtllm") == ["1.2.0rc5", "1.3.0rc10"]


def test_warehouse_and_tree_give_identical_answers(warehouse_root):
    tree, wh = Estimator(TreeSource(SHARED_DATA)), Estimator(WarehouseSource(warehouse_root))
    table = tree.table("h200_sxm", "trtllm", "1.3.0rc10", "gemm_perf", shared=False)
    rng = np.random.default_rng(5)
    sites = table.select("n", "k").unique().sort("n", "k").to_numpy()
    n, k = sites[rng.integers(len(sites), size=400)].T
    m = np.exp(rng.uniform(0, np.log(100_000), 400)).astype(np.int64)
    frame = pl.DataFrame({"system": "h200_sxm", "backend": "trtllm", "version": "1.3.0rc15", "quant": "bfloat16",
                          "m": m, "n": n, "k": k})
    ours = estimate(wh, "gemm", frame, mode="silicon")
    ref = estimate(tree, "gemm", frame, mode="silicon")
    assert ours["latency_ms"].to_list() == ref["latency_ms"].to_list()
    assert ours["source"].to_list() == ref["source"].to_list()


def test_missing_table_in_warehouse_is_named(warehouse_root):
    from perfledger.estimator.errors import NoDataError

    with pytest.raises(NoDataError, match="moe_perf"):
        WarehouseSource(warehouse_root).resolve("h200_sxm", "trtllm", "1.3.0rc20", "moe_perf")


def test_cache_follows_the_batches_version(tmp_path):
    """A source instance keeps its reuse/version lists until an ingest commits a new batches version."""
    from perfledger.warehouse.ingest import ingest
    from perfledger.warehouse.store import Warehouse

    wh = Warehouse(tmp_path)
    ingest([str(GEMM / "1.2.0rc5")], wh)
    src = WarehouseSource(tmp_path)
    before = src.batches_version()
    assert before == wh.table_version("batches")
    assert src.versions("h200_sxm", "gemm", "trtllm") == ["1.2.0rc5"]
    assert src.reuse_donors("h200_sxm", "gemm", "trtllm", "1.3.0rc15") == {}
    ingest([str(GEMM / v) for v in ("1.3.0rc10", "1.3.0rc15")], wh)
    assert src.batches_version() == wh.table_version("batches") > before
    assert src.versions("h200_sxm", "gemm", "trtllm") == ["1.2.0rc5", "1.3.0rc10"]
    assert src.reuse_donors("h200_sxm", "gemm", "trtllm", "1.3.0rc15") == {"gemm_perf": "1.3.0rc10"}


def test_a_remembered_miss_still_raises_the_typed_error(warehouse_root):
    from perfledger.estimator.errors import NoDataError

    est = Estimator(WarehouseSource(warehouse_root))
    for _ in range(2):
        with pytest.raises(NoDataError, match="moe_perf"):
            est.table("h200_sxm", "trtllm", "1.3.0rc20", "moe_perf", shared=True)


@pytest.fixture(scope="module")
def kda_warehouse(tmp_path_factory):
    """b200 KDA rows of sglang 0.5.16 and the vLLM version that lends it causal_conv1d_fn_qkv3 rows."""
    from perfledger.warehouse.ingest import ingest
    from perfledger.warehouse.store import Warehouse

    root = tmp_path_factory.mktemp("kda_wh")
    kda = SHARED_DATA / "b200_sxm" / "kda"
    report = ingest([str(kda / "sglang" / "0.5.16"), str(kda / "vllm" / "0.1.dev19262")], Warehouse(root))
    assert not report.failed_batches, report.failed_batches
    return root


def test_warehouse_lends_across_backends_like_the_tree(kda_warehouse):
    """No manifest beside the warehouse: ../shared's catalog lends vLLM's conv rows, as for the tree."""
    from perfledger import settings
    from perfledger.estimator.data.cross_backend import MANIFEST, manifest_path

    wh, tree = WarehouseSource(kda_warehouse), TreeSource(SHARED_DATA)
    assert manifest_path(wh) == manifest_path(tree) == settings.reference_catalogs_dir() / MANIFEST
    cols = ["kernel_source", "phase", "num_k_heads", "batch_size", "seq_len", "latency", "_source_version"]
    ours = wh.resolve("b200_sxm", "sglang", "0.5.16", "kda_perf").select(cols).sort(cols[:5])
    ref = tree.resolve("b200_sxm", "sglang", "0.5.16", "kda_perf").select(cols).sort(cols[:5])
    assert ours.equals(ref) and "vllm/0.1.dev19262" in ours["_source_version"].to_list()


def test_a_manifest_beside_the_warehouse_is_the_one_read(kda_warehouse, tmp_path):
    import shutil

    root = tmp_path / "wh"
    shutil.copytree(kda_warehouse, root)
    (root / "perf_data_reuse_manifest.yaml").write_text("groups: []\n")  # lends nothing
    rows = WarehouseSource(root).resolve("b200_sxm", "sglang", "0.5.16", "kda_perf")
    assert set(rows["_source_version"].to_list()) == {"0.5.16"}


def test_a_miss_names_the_newer_version_holding_the_rows_like_the_tree(kda_warehouse):
    from perfledger.estimator.errors import NoDataError

    for source in (WarehouseSource(kda_warehouse), TreeSource(SHARED_DATA)):
        with pytest.raises(NoDataError, match=r"kda_perf rows for b200_sxm/sglang/0\.5\.14 .*looked in 0\.5\.14\); "
                                              r"b200_sxm/sglang holds them at 0\.5\.16$"):
            source.resolve("b200_sxm", "sglang", "0.5.14", "kda_perf", shared=False)
