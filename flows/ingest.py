"""The ingest task and flow: discover → validate → commit over `warehouse.ingest` (or its partitioned twin)."""

from __future__ import annotations

from prefect import flow, task

from perfledger.flows.retry import RETRY_TRANSIENT
from perfledger.warehouse.store import Warehouse


@task(name="ingest-sources", **RETRY_TRANSIENT)
def ingest_task(sources: list[str], root: str, partitioned: bool = False) -> dict:
    """IO task: re-running converges (slices are replaced, not appended); known content is a no-op.

    `partitioned` prepares batches as tasks on the flow's task runner (Dask workers under --runner dask).
    """
    from perfledger.ledger.hooks import on_ingest

    if partitioned:
        from perfledger.flows.partitioned import partitioned_ingest

        return partitioned_ingest(sources, root, on_ingest)
    from perfledger.warehouse.ingest import ingest

    return ingest(sources, Warehouse(root), on_commit=on_ingest).to_json()


@flow(name="ingest", log_prints=True)
def ingest_flow(sources: list[str], warehouse_root: str) -> dict:
    return ingest_task(sources, warehouse_root)
