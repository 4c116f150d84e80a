"""Ingest with batch preparation fanned out as tasks (Dask workers under `--runner dask`).

Preparing a batch (read, type, normalise) is pure and independent per batch, so it runs on the
workers; window validation and committing stay in the flow process under the warehouse's run lock,
in discovery order, through the same finalise_window + CommitBuffer as a local ingest, so the
warehouse ends up with the same contents. Submission is windowed: at most IN_FLIGHT batches are
submitted and not yet taken, and each prepared batch is streamed to the committer as soon as it is its
turn, so memory is bounded by the window, not by the number of batches.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

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


T = TypeVar("T")
IN_FLIGHT = 8  # prepared batches submitted but not yet taken by the committer (about 4 per worker)


def windowed(items: Iterable[T], submit: Callable[[T], Any], window: int) -> Iterator[Any]:
    """The futures of `submit(item)` in order, never more than `window` submitted and not yet yielded:
    the next item is submitted only once the oldest result is taken."""
    if window < 1:
        raise ValueError(f"window must be at least 1, not {window}")
    source = iter(items)
    pending: deque = deque()
    for item in source:
        pending.append(submit(item))
        if len(pending) >= window:
            break
    while pending:
        yield pending.popleft()
        following = next(source, None)
        if following is not None:
            pending.append(submit(following))


def prepare_on_runner(batches: list[BatchSource], window: int = IN_FLIGHT) -> Iterator[PreparedBatch | BatchError]:
    """A PrepareMap for warehouse.ingest: batches submitted in a sliding window, results taken in order."""
    for future in windowed(batches, prepare_task.submit, window):
        prepared = future.result()
        yield BatchError(prepared) if isinstance(prepared, str) else prepared


def partitioned_ingest(sources: list[str], root: str, on_commit: OnCommit | None = None) -> dict:
    """The ingest contract of warehouse.ingest.ingest, with preparation submitted to the task runner."""
    return ingest(sources, Warehouse(Path(root)), on_commit=on_commit, prepare_map=prepare_on_runner).to_json()
