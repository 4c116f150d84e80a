"""`--runner dask`: batch preparation on a 2-worker LocalCluster gives the same warehouse as a local run."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from perfledger.flows.config import load_pipeline_config
from perfledger.flows.pipeline import run_pipeline
from perfledger.warehouse.store import Warehouse
from tests.flows.conftest import GEMM, write_config

pytestmark = pytest.mark.xdist_group("prefect")
VOLATILE = {"ingested_at", "started_at", "finished_at", "first_ingest", "last_ingest", "at", "recorded_at", "processed_at"}


def contents(root: Path) -> dict[str, pl.DataFrame]:
    """Every table of the warehouse, timestamps dropped, rows in a canonical order."""
    wh = Warehouse(root)
    names = [f"curated/{t}" for t in wh.curated_tables()] + sorted(
        p.name for p in root.iterdir() if (p / "_delta_log").is_dir())
    out = {}
    for name in names:
        frame = wh.read_curated(name.split("/", 1)[1]) if name.startswith("curated/") else wh.read_table(name)
        frame = frame.drop([c for c in frame.columns if c in VOLATILE])
        nested = (pl.List, pl.Struct)
        sortable = [c for c in frame.columns if frame[c].dtype not in nested and not isinstance(frame[c].dtype, nested)]
        out[name] = frame.sort(sortable)
    return out


def test_dask_runner_matches_local_run(tmp_path: Path, prefect_server, shared_tree: Path) -> None:
    sources = [str(shared_tree / "b200_sxm" / "kda"), str(shared_tree / "h200_sxm" / "mla_bmm"),
               str(shared_tree / GEMM / "0.22.0")]
    results = {}
    for runner in ("local", "dask"):
        cfg = load_pipeline_config(write_config(tmp_path / f"{runner}.yaml", sources=sources, models=["kimi-k3"],
                                                warehouse=tmp_path / runner / "wh", out=tmp_path / runner / "out",
                                                stages=["ingest", "validate", "ledger"]))
        results[runner] = run_pipeline(cfg, runner=runner)
    assert results["dask"]["ingest"]["new_batches"] == results["local"]["ingest"]["new_batches"] >= 5
    local, dask = contents(tmp_path / "local" / "wh"), contents(tmp_path / "dask" / "wh")
    assert sorted(local) == sorted(dask) and "curated/gemm_perf" in local and "ledger_cells" in local
    for name in local:
        assert local[name].equals(dask[name]), name


def test_windowed_submission_keeps_at_most_the_window_in_flight() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from perfledger.flows.partitioned import windowed

    submitted: list[int] = []
    with ThreadPoolExecutor(max_workers=4) as pool:
        def submit(item: int):
            submitted.append(item)
            return pool.submit(lambda: item * item)

        taken = []
        for future in windowed(range(20), submit, 3):
            assert len(submitted) - len(taken) <= 3  # in flight: submitted and not yet taken
            taken.append(future.result())
    assert taken == [i * i for i in range(20)] and submitted == list(range(20))
    with pytest.raises(ValueError, match="window must be at least 1"):
        list(windowed([1], submit, 0))


def test_bundles_keep_order_and_bounds(shared_tree: Path) -> None:
    from perfledger.flows.partitioned import bundles
    from perfledger.schemas.catalog import load_catalog
    from perfledger.warehouse.discover import discover

    batches = discover(str(shared_tree / "h200_sxm" / "gemm"), load_catalog())
    sizes = {b.key: sum(p.stat().st_size for p in b.files) for b in batches}
    grouped = list(bundles(batches, max_bytes=2 << 20, max_batches=3))
    assert [b.key for bundle in grouped for b in bundle] == [b.key for b in batches]
    assert all(len(bundle) <= 3 for bundle in grouped) and len(grouped) > 1
    assert all(len(bundle) == 1 or sum(sizes[b.key] for b in bundle) <= 2 << 20 for bundle in grouped)
