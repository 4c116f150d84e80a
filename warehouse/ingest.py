"""Ingest batches into the warehouse: discover, skip known content, prepare, commit (warehouse.commit)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from perfledger.schemas.catalog import Catalog, CatalogError, load_catalog
from perfledger.warehouse.commit import CommitBuffer
from perfledger.warehouse.discover import BatchSource, DiscoveryFailure, discover
from perfledger.warehouse.lock import run_lock
from perfledger.warehouse.prepare import BatchError, PreparedBatch, prepare_batch
from perfledger.warehouse.store import Warehouse
from perfledger.warehouse.validate import finalise_window

WINDOW_ROWS = 3_000_000
OnCommit = Callable[[Warehouse, list[str]], None]
PrepareMap = Callable[[list[BatchSource]], Iterable[PreparedBatch | BatchError]]


@dataclass
class IngestReport:
    """What an ingest did; `to_json()` is the CLI contract."""

    batches: int = 0
    new_batches: int = 0
    rows_accepted: int = 0
    rows_quarantined: int = 0
    rows_duplicate: int = 0
    rows_advisory: int = 0
    failed_batches: list[dict] = field(default_factory=list)
    tables: dict[str, int] = field(default_factory=dict)
    batch_ids: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, prepared: PreparedBatch) -> None:
        self.new_batches += 1
        self.batch_ids.append(prepared.batch_id)
        self.rows_accepted += prepared.count("rows_accepted")
        self.rows_quarantined += prepared.count("rows_quarantined")
        self.rows_duplicate += prepared.count("rows_duplicate")
        self.rows_advisory += sum(t.advisories.height for t in prepared.tables.values())
        self.warnings.extend(prepared.warnings)
        for name, table in prepared.tables.items():
            self.tables[name] = self.tables.get(name, 0) + table.rows_accepted

    def to_json(self) -> dict:
        return {
            "batches": self.batches, "new_batches": self.new_batches, "rows_accepted": self.rows_accepted,
            "rows_quarantined": self.rows_quarantined, "rows_duplicate": self.rows_duplicate,
            "failed_batches": self.failed_batches, "tables": dict(sorted(self.tables.items())),
            "rows_advisory": self.rows_advisory, "warnings": self.warnings,
        }


def discover_all(sources: Iterable[str], catalog: Catalog,
                 **identity: str | None) -> tuple[list[BatchSource], list[DiscoveryFailure]]:
    found: list[BatchSource] = []
    failed: list[DiscoveryFailure] = []
    for source in sources:
        for item in discover(source, catalog, **identity):
            (failed if isinstance(item, DiscoveryFailure) else found).append(item)
    return found, failed


def known_hashes(warehouse: Warehouse) -> set[str]:
    if not warehouse.has_table("batches"):
        return set()
    return set(warehouse.read_table("batches")["content_hash"].to_list())


def prepare_in_order(batches: list[BatchSource]) -> Iterator[PreparedBatch | BatchError]:
    """The default PrepareMap: prepare each batch here, one after the other."""
    catalog = load_catalog()
    for batch in batches:
        try:
            yield prepare_batch(batch, catalog)
        except (BatchError, CatalogError) as exc:
            yield BatchError(str(exc))


def ingest(sources: Iterable[str], warehouse: Warehouse | None, *, system: str | None = None,
           backend: str | None = None, version: str | None = None, on_commit: OnCommit | None = None,
           progress: Callable[[int, int], None] | None = None,
           prepare_map: PrepareMap = prepare_in_order, known_in: Warehouse | None = None) -> IngestReport:
    """Ingest every batch under `sources`; with `warehouse=None` only validate (nothing written), and
    batches whose content `known_in` already holds count as known, not new, as an ingest there would.

    Everything the run writes (curated slices, findings, batch records, the `on_commit` hook's tables)
    is one commit unit: visible all at once when the run returns, rolled back if anything raises.

    `prepare_map` prepares the new batches and yields them (or their BatchError) in the given order;
    a task runner can fan the preparation out (flows/partitioned.py) while validation and commits
    stay here, so every runner produces the same warehouse.
    """
    catalog = load_catalog()
    batches, failures = discover_all(sources, catalog, system=system, backend=backend, version=version)
    report = IngestReport(batches=len(batches) + len(failures))
    report.failed_batches = [{"source": f.source, "error": f.error} for f in failures]
    if warehouse is None:
        known = known_hashes(known_in) if known_in is not None else set()
        _prepare_windows(batches, catalog, known, report, lambda window: None, progress, prepare_map)
        return report
    with run_lock(warehouse.root, purpose="ingest"), warehouse.unit():
        buffer = CommitBuffer(warehouse)
        _prepare_windows(batches, catalog, known_hashes(warehouse), report, buffer.add_window, progress, prepare_map)
        buffer.close()
        if on_commit:  # also with nothing new: the hook catches up on batches an earlier run committed
            on_commit(warehouse, report.batch_ids)
    return report


def _new_batches(batches: list[BatchSource], known: set[str]) -> list[BatchSource]:
    """Batches whose content is not in the warehouse yet (nor earlier in this run)."""
    seen, todo = set(known), []
    for batch in batches:
        if batch.content_hash() not in seen:
            seen.add(batch.content_hash())
            todo.append(batch)
    return todo


def _prepare_windows(batches: list[BatchSource], catalog: Catalog, known: set[str], report: IngestReport,
                     sink: Callable[[list[PreparedBatch]], None], progress: Callable[[int, int], None] | None,
                     prepare_map: PrepareMap) -> None:
    """Prepare new batches in windows of about WINDOW_ROWS rows; validate and hand each window on.

    The sink (the Delta writes) of one window runs in a second thread while the next window is read
    and validated: both sides spend their time in Arrow/Polars/Delta code that releases the GIL. At
    most one window is being written, so memory stays bounded at about two windows.
    """
    todo = _new_batches(batches, known)
    window: list[PreparedBatch] = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="commit") as writer:
        in_flight: Future | None = None

        def close_window() -> None:
            nonlocal in_flight
            finalise_window(window, catalog)
            for prepared in window:
                report.add(prepared)
            if in_flight is not None:
                in_flight.result()  # re-raises a failed write before anything else is queued
            in_flight = writer.submit(sink, list(window))
            window.clear()

        for done, (batch, prepared) in enumerate(zip(todo, prepare_map(todo), strict=True), 1):
            if progress:
                progress(done, len(todo))
            if isinstance(prepared, BatchError):
                report.failed_batches.append({"source": batch.source, "error": str(prepared)})
                continue
            window.append(prepared)
            if sum(p.rows_in for p in window) >= WINDOW_ROWS:
                close_window()
        if window:
            close_window()
        if in_flight is not None:
            in_flight.result()
