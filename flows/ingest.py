"""The ingest flow: discover → validate → commit, as one Prefect task over `warehouse.ingest`."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, task

from warehouse.ingest import OnCommit, ingest
from warehouse.store import Warehouse


@task(name="ingest-sources", retries=2, retry_delay_seconds=2)
def ingest_sources(sources: list[str], root: str, system: str | None, backend: str | None,
                   version: str | None, on_commit: OnCommit | None = None) -> dict:
    """IO task: retried on transient errors; re-running converges (slices are replaced, not appended)."""
    return ingest(sources, Warehouse(Path(root)), system=system, backend=backend, version=version,
                  on_commit=on_commit).to_json()


@flow(name="ingest", log_prints=True)
def ingest_flow(sources: list[str], warehouse_root: str, system: str | None = None, backend: str | None = None,
                version: str | None = None, on_commit: OnCommit | None = None) -> dict:
    return ingest_sources(sources, warehouse_root, system, backend, version, on_commit)
