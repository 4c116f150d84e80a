"""Ingest with batch preparation fanned out as tasks (Dask workers under `--runner dask`).

Preparing a batch (read, type, normalise) is pure and independent per batch, so it runs on the
workers; window validation and committing stay in the flow process under the warehouse's run lock,
in discovery order, through the same finalise_window + CommitBuffer as a local ingest, so the
warehouse ends up with the same contents.
"""

from __future__ import annotations

from pathlib import Path

from prefect import task

from schemas.catalog import CatalogError, load_catalog
from warehouse.discover import BatchSource
from warehouse.commit import CommitBuffer
from warehouse.ingest import WINDOW_ROWS, IngestReport, OnCommit, discover_all, known_hashes
from warehouse.lock import run_lock
from warehouse.prepare import BatchError, PreparedBatch, prepare_batch
from warehouse.store import Warehouse
from warehouse.validate import finalise_window


@task(name="prepare-batch", retries=2, retry_delay_seconds=1)
def prepare_task(batch: BatchSource) -> PreparedBatch | str:
    """A prepared batch, or the error text of a batch that fails (it is reported, never committed)."""
    try:
        return prepare_batch(batch, load_catalog())
    except (BatchError, CatalogError) as exc:
        return str(exc)


def partitioned_ingest(sources: list[str], root: str, on_commit: OnCommit | None = None) -> dict:
    """The ingest contract of warehouse.ingest.ingest, with preparation submitted to the task runner."""
    catalog = load_catalog()
    batches, failures = discover_all(sources, catalog)
    report = IngestReport(batches=len(batches) + len(failures))
    report.failed_batches = [{"source": f.source, "error": f.error} for f in failures]
    warehouse = Warehouse(Path(root))
    with run_lock(warehouse.root, purpose="ingest (partitioned)"):
        seen = set(known_hashes(warehouse))
        todo = []
        for batch in batches:
            if batch.content_hash() not in seen:
                seen.add(batch.content_hash())
                todo.append(batch)
        futures = [prepare_task.submit(batch) for batch in todo]
        buffer = CommitBuffer(warehouse)
        window: list[PreparedBatch] = []
        for batch, future in zip(todo, futures):
            prepared = future.result()
            if isinstance(prepared, str):
                report.failed_batches.append({"source": batch.source, "error": prepared})
                continue
            window.append(prepared)
            if sum(p.rows_in for p in window) >= WINDOW_ROWS:
                _commit_window(window, catalog, report, buffer)
        if window:
            _commit_window(window, catalog, report, buffer)
        buffer.close()
    if on_commit and report.batch_ids:
        on_commit(warehouse, report.batch_ids)
    return report.to_json()


def _commit_window(window: list[PreparedBatch], catalog, report: IngestReport, buffer: CommitBuffer) -> None:
    finalise_window(window, catalog)
    for prepared in window:
        report.add(prepared)
    buffer.add_window(list(window))
    window.clear()
