"""Ingest with batch preparation fanned out as tasks (Dask workers under `--runner dask`).

Preparing a batch (type, normalise) is pure and independent per batch, so it runs on the workers.
What a worker needs travels with its task: each batch's files are read here, in the flow process, and
their bytes shipped with the bundle, so a worker opens no path of this machine and needs no warehouse
location or storage options (it never touches the warehouse). Window validation and committing stay
in the flow process under the warehouse's run lock, in discovery order, through the same
finalise_window + CommitBuffer as a local ingest, so the warehouse ends up with the same contents.
Batches travel in bundles of a few MiB of source, and submission is windowed: at most IN_FLIGHT
bundles are read, submitted and not yet taken, and each prepared batch is streamed to the committer
as soon as it is its turn, so memory is bounded by the window, not by the number of batches.
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
from perfledger.warehouse.prepare import BatchError, PreparedBatch, prepare_batch, read_contents
from perfledger.warehouse.store import Warehouse

Shipped = tuple[BatchSource, dict[Path, bytes] | str]  # a batch and its files' bytes, or why they could not be read


def ship(bundle: list[BatchSource]) -> list[Shipped]:
    """Each batch of the bundle with its contents, read here (a bundle holds at most BUNDLE_BYTES of them,
    or one bigger batch alone); a batch whose files cannot be read travels as its error."""
    shipped: list[Shipped] = []
    for batch in bundle:
        batch.content_hash()  # cached since the known-content check; the id must travel computed (a worker would read files)
        try:
            shipped.append((batch, read_contents(batch)))
        except BatchError as exc:
            shipped.append((batch, str(exc)))
    return shipped


@task(name="prepare-batches", **RETRY_TRANSIENT)
def prepare_task(bundle: list[Shipped]) -> list[PreparedBatch | str]:
    """Each batch of a bundle prepared from its shipped contents, or the error text of one that fails
    (reported, never committed). Batches travel in bundles: one task per small batch would cost more in
    orchestration than it saves."""
    out: list[PreparedBatch | str] = []
    for batch, contents in bundle:
        if isinstance(contents, str):
            out.append(contents)
            continue
        try:
            out.append(prepare_batch(batch, load_catalog(), contents))
        except (BatchError, CatalogError) as exc:
            out.append(str(exc))
    return out


def bundles(batches: list[BatchSource], max_bytes: int, max_batches: int) -> Iterator[list[BatchSource]]:
    """Consecutive batches grouped up to `max_bytes` of files (tables and sidecars: what a task ships)
    or `max_batches` (a big batch alone)."""
    bundle: list[BatchSource] = []
    size = 0
    for batch in batches:
        weight = sum(p.stat().st_size for p in [*batch.files, *batch.sidecars])
        if bundle and (size + weight > max_bytes or len(bundle) >= max_batches):
            yield bundle
            bundle, size = [], 0
        bundle.append(batch)
        size += weight
    if bundle:
        yield bundle


T = TypeVar("T")
IN_FLIGHT = 4  # bundles submitted but not yet taken by the committer (about 2 per worker)
BUNDLE_BYTES = 4 << 20  # source bytes per bundle (Parquet is compressed: a few times that in memory)
BUNDLE_BATCHES = 32


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
    """A PrepareMap for warehouse.ingest: bundles read and submitted in a sliding window (so at most
    `window` bundles of source bytes are held), results taken in order."""
    def submit(bundle: list[BatchSource]):
        return prepare_task.submit(ship(bundle))

    for future in windowed(bundles(batches, BUNDLE_BYTES, BUNDLE_BATCHES), submit, window):
        for prepared in future.result():
            yield BatchError(prepared) if isinstance(prepared, str) else prepared


def partitioned_ingest(sources: list[str], root: str, on_commit: OnCommit | None = None) -> dict:
    """The ingest contract of warehouse.ingest.ingest, with preparation submitted to the task runner."""
    return ingest(sources, Warehouse(root), on_commit=on_commit, prepare_map=prepare_on_runner).to_json()
