"""Ingest with batch preparation fanned out as tasks (Dask workers under `--runner dask`).

Preparing a batch (read, type, normalise) is pure and independent per batch, so it runs on the
workers; window validation and committing stay in the flow process under the warehouse's run lock,
in discovery order, through the same finalise_window + CommitBuffer as a local ingest, so the
warehouse ends up with the same contents.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from prefect import task

from perfledger.flows.retry import RETRY_TRANSIENT
from perfledger.schemas.catalog import CatalogError, load_catalog
from perfledger.warehouse.discover import BatchSource
from perfledger.warehouse.ingest import OnCommit, ingest
from perfledger.warehouse.prepare import BatchError, PreparedBatch, prepare_batch
from perfledger.warehouse.store import Warehouse


@task(name="prepare-batch", **RETRY_TRANSIENT)
def prepare_task(batch: BatchSource) -> PreparedBatch | str:
    """A prepared batch, or the error text of a batch that fails (it is reported, never committed)."""
    try:
        return prepare_batch(batch, load_catalog())
    except (BatchError, CatalogError) as exc:
        return str(exc)


def prepare_on_runner(batches: list[BatchSource]) -> Iterator[PreparedBatch | BatchError]:
    """A PrepareMap for warehouse.ingest: every batch submitted at once, results taken in order."""
    futures = [prepare_task.submit(batch) for batch in batches]
    for future in futures:
        prepared = future.result()
        yield BatchError(prepared) if isinstance(prepared, str) else prepared


def partitioned_ingest(sources: list[str], root: str, on_commit: OnCommit | None = None) -> dict:
    """The ingest contract of warehouse.ingest.ingest, with preparation submitted to the task runner."""
    return ingest(sources, Warehouse(Path(root)), on_commit=on_commit, prepare_map=prepare_on_runner).to_json()
