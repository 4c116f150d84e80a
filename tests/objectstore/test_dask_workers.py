"""`--runner dask` with workers that share no filesystem with the flow process, into an S3 warehouse.

A 2-worker LocalCluster (processes) whose workers are made machines of their own before the ingest: each
works in an empty folder of its own and has no perfledger or AWS settings in its environment. The sources
are named by relative paths (checked), so a worker that opened a source path would find nothing and the
batch would fail; a worker that opened the warehouse would have no options to reach the S3 server. The
ingest must equal a local-runner ingest of the same input, table for table (the object-store tests'
helpers), failures included.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import polars as pl
import pytest
from distributed import Client, LocalCluster, WorkerPlugin
from prefect import flow

from perfledger.flows.ingest import ingest_task
from perfledger.flows.pipeline import task_runner
from perfledger.schemas.catalog import load_catalog
from perfledger.settings import ObjectLocation
from perfledger.warehouse import objects
from perfledger.warehouse.ingest import discover_all
from perfledger.warehouse.store import Warehouse
from tests.flows.conftest import prefect_server  # noqa: F401 (the fixture: Prefect runs the Dask flow)
from tests.flows.test_dask import VOLATILE
from tests.flows.test_reliability import _state

pytestmark = pytest.mark.xdist_group("objectstore-s3")
SETTINGS_PREFIXES = ("PERFLEDGER_", "AWS_")
RECORD_TABLES = ("batches", "batch_tables", "file_layouts", "sidecars", "collection_failures", "quarantine", "duplicates")


class NoSharedFilesystem(WorkerPlugin):
    """A worker as on another machine: an empty working folder, and no perfledger or AWS settings."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def setup(self, worker) -> None:
        os.chdir(self.folder)
        for name in [n for n in os.environ if n.startswith(SETTINGS_PREFIXES)]:
            del os.environ[name]


def _worker_view() -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """What a worker sees: its working folder, what lies there, and which settings it has."""
    return os.getcwd(), tuple(sorted(os.listdir("."))), tuple(sorted(n for n in os.environ if n.startswith(SETTINGS_PREFIXES)))


def _copy(source: Path, target: Path) -> None:
    """A writable copy of a read-only ../shared folder."""
    shutil.copytree(source, target, copy_function=shutil.copyfile)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def _records(root: str) -> dict[str, pl.DataFrame]:
    """The batch records and findings of a warehouse, timestamps dropped, rows in a canonical order."""
    wh = Warehouse(root)
    out = {}
    for name in (n for n in RECORD_TABLES if wh.has_table(n)):
        frame = wh.read_table(name)
        frame = frame.drop([c for c in frame.columns if c in VOLATILE])
        out[name] = frame.sort([c for c in frame.columns if not isinstance(frame[c].dtype, (pl.List, pl.Struct))])
    return out


def _raw_keys(root: str) -> set[str]:
    wh = Warehouse(root)
    assert isinstance(wh.root, ObjectLocation)
    return {key for key, _ in objects.listing(wh.root / "raw")}


def test_dask_workers_without_the_source_folder_ingest_into_s3_as_a_local_run(
        s3, tmp_path: Path, shared_tree: Path, shared_campaign: Path, monkeypatch, prefect_server) -> None:  # noqa: F811
    submitter, worker_home = tmp_path / "submitter", tmp_path / "worker"
    worker_home.mkdir()
    data = submitter / "tree" / "systems" / "data"
    for part in ("b200_sxm/kda", "l40s/kda", "h200_sxm/mla_bmm", "h200_sxm/gemm/sglang/0.5.6.post2"):
        _copy(shared_tree / part, data / part)
    broken = next((data / "h200_sxm/mla_bmm").rglob("*.parquet"))
    broken.write_bytes(broken.read_bytes()[:200])  # one batch fails: its error must read the same from a worker
    _copy(shared_campaign / "h200_sxm", submitter / shared_campaign.name / "h200_sxm")
    monkeypatch.chdir(submitter)
    sources = ["tree", f"{shared_campaign.name}/h200_sxm"]
    batches, _ = discover_all(sources, load_catalog())
    assert len(batches) >= 6 and {b.kind for b in batches} == {"tree", "staging"}
    assert all(not path.is_absolute() for b in batches for path in [*b.files, *b.sidecars]), "sources must be relative"

    local, distributed = f"{s3.bucket()}/wh", f"{s3.bucket()}/wh"
    expected = ingest_task.fn(sources, local)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.register_plugin(NoSharedFilesystem(str(worker_home)))
        views = client.run(_worker_view)
        assert len(views) == 2 and set(views.values()) == {(str(worker_home), (), ())}

        @flow(task_runner=task_runner("dask", cluster.scheduler_address))
        def ingest_on_workers() -> dict:
            return ingest_task(sources, distributed, partitioned=True)

        got = ingest_on_workers()
        assert set(client.run(_worker_view).values()) == {(str(worker_home), (), ())}  # nothing written there

    assert got == expected and got["new_batches"] == len(batches) - 1 >= 5
    assert [f["source"] for f in got["failed_batches"]] == [f"tree:h200_sxm/mla_bmm/{broken.parent.parent.name}/"
                                                           f"{broken.parent.name}"]
    want, have = _state(local), _state(distributed)
    assert want.keys() == have.keys() and "ledger_cells" in want and len(want) >= 5
    for name, frame in want.items():
        assert have[name].equals(frame), name
    want, have = _records(local), _records(distributed)
    assert want.keys() == have.keys() and {"batches", "batch_tables", "file_layouts", "collection_failures"} <= set(want)
    for name, frame in want.items():
        assert have[name].equals(frame), name
    assert _raw_keys(local) == _raw_keys(distributed) != set()
