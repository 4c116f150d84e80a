"""Ingest batches into the warehouse: skip known content, prepare, commit table by table.

Commit order makes interruption safe: curated slices, quarantine, advisories and duplicates are
replaced slice by slice (predicate overwrite: re-running converges, nothing doubles), and the
`batches` record is written last, so a batch counts as ingested only once all its rows are in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone

import polars as pl

from schemas.catalog import Catalog, CatalogError, load_catalog
from warehouse.discover import BatchSource, DiscoveryFailure, discover
from warehouse.lock import run_lock
from warehouse.prepare import BatchError, PreparedBatch, prepare_batch
from warehouse.store import SLICE_COLUMNS, Warehouse

FLUSH_ROWS = 2_000_000
FINDING_SLICE = ("table", "system", "backend", "version")
OnCommit = Callable[[Warehouse, list[str]], None]


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


def discover_all(sources: Iterable[str], catalog: Catalog, **identity: str | None) -> tuple[list[BatchSource], list[DiscoveryFailure]]:
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


def ingest(sources: Iterable[str], warehouse: Warehouse | None, *, system: str | None = None,
           backend: str | None = None, version: str | None = None, on_commit: OnCommit | None = None,
           progress: Callable[[int, int], None] | None = None) -> IngestReport:
    """Ingest every batch under `sources`; with `warehouse=None` only validate (nothing written)."""
    catalog = load_catalog()
    batches, failures = discover_all(sources, catalog, system=system, backend=backend, version=version)
    report = IngestReport(batches=len(batches) + len(failures))
    report.failed_batches = [{"source": f.source, "error": f.error} for f in failures]
    if warehouse is None:
        _prepare_each(batches, catalog, set(), report, lambda prepared: None, progress)
        return report
    with run_lock(warehouse.root, purpose="ingest"):
        pending: list[PreparedBatch] = []

        def collect(prepared: PreparedBatch) -> None:
            pending.append(prepared)
            if sum(p.count("rows_accepted") for p in pending) >= FLUSH_ROWS:
                commit(warehouse, pending)
                pending.clear()

        _prepare_each(batches, catalog, known_hashes(warehouse), report, collect, progress)
        commit(warehouse, pending)
    if on_commit and report.batch_ids:
        on_commit(warehouse, report.batch_ids)
    return report


def _prepare_each(batches: list[BatchSource], catalog: Catalog, known: set[str], report: IngestReport,
                  sink: Callable[[PreparedBatch], None], progress: Callable[[int, int], None] | None) -> None:
    seen = set(known)
    for done, batch in enumerate(batches, 1):
        if progress:
            progress(done, len(batches))
        digest = batch.content_hash()
        if digest in seen:
            continue
        seen.add(digest)
        try:
            prepared = prepare_batch(batch, catalog)
        except (BatchError, CatalogError) as exc:
            report.failed_batches.append({"source": batch.source, "error": str(exc)})
            continue
        report.add(prepared)
        sink(prepared)


def _latest_per_slice(pending: list[PreparedBatch]) -> dict[tuple, tuple[PreparedBatch, str]]:
    """Within one commit, a later batch for the same table slice supersedes an earlier one."""
    latest: dict[tuple, tuple[PreparedBatch, str]] = {}
    for prepared in pending:
        for table in prepared.tables:
            src = prepared.source
            latest[(table, src.system, src.backend, src.version)] = (prepared, table)
    return latest


def commit(warehouse: Warehouse, pending: list[PreparedBatch]) -> None:
    """Write prepared batches: data tables first, the `batches` record last."""
    if not pending:
        return
    latest = _latest_per_slice(pending)
    by_table: dict[str, list[tuple[tuple, PreparedBatch]]] = {}
    for slice_key, (prepared, table) in latest.items():
        by_table.setdefault(table, []).append((slice_key, prepared))
    for table, items in sorted(by_table.items()):
        frames = [p.tables[table].curated for _, p in items]
        curated = pl.concat(frames, how="diagonal_relaxed")
        warehouse.replace_slices(warehouse.curated_uri(table), curated, SLICE_COLUMNS, partition_by=SLICE_COLUMNS,
                                 clear=[k[1:] for k, _ in items])
    for name, attribute in (("quarantine", "quarantine"), ("advisories", "advisories"), ("duplicates", "duplicates")):
        frames = [getattr(p.tables[k[0]], attribute) for k, (p, _) in latest.items()]
        frames = [f.with_columns(pl.lit(k[0]).alias("table")) if "table" not in f.columns else f
                  for f, k in zip(frames, latest, strict=True)]
        combined = pl.concat(frames, how="diagonal_relaxed")
        warehouse.replace_slices(warehouse.table_uri(name), combined, FINDING_SLICE, partition_by=["table"],
                                 clear=list(latest))
    _write_reuse(warehouse, pending)
    warehouse.write_table("batch_tables", pl.concat([_batch_table_rows(p) for p in pending], how="diagonal_relaxed"))
    warehouse.write_table("batches", pl.DataFrame([_batch_row(p) for p in pending]))


def _write_reuse(warehouse: Warehouse, pending: list[PreparedBatch]) -> None:
    tree = [p for p in pending if p.source.kind == "tree"]
    if not tree:
        return
    rows = [{"system": p.source.system, "family": p.source.family, "backend": p.source.backend,
             "version": p.source.version, "batch_id": p.batch_id, **entry}
            for p in tree for entry in p.reuse]
    schema = {c: pl.String for c in ("system", "family", "backend", "version", "batch_id", "table", "from_version",
                                      "reason", "approved_by")}
    frame = pl.DataFrame(rows, schema=schema)
    clear = [(p.source.system, p.source.family, p.source.backend, p.source.version) for p in tree]
    warehouse.replace_slices(warehouse.table_uri("reuse"), frame, ("system", "family", "backend", "version"), clear=clear)


def _meta_field(prepared: PreparedBatch, *path: str) -> str | None:
    node: object = prepared.meta
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return None if node is None else str(node)


def _batch_row(prepared: PreparedBatch) -> dict:
    src = prepared.source
    return {
        "batch_id": prepared.batch_id, "content_hash": src.content_hash(), "source": src.source,
        "source_kind": src.kind, "source_key": src.key, "system": src.system, "family": src.family,
        "backend": src.backend, "version": src.version, "status": "ingested", "error": None,
        "files": len(src.files), "rows_accepted": prepared.count("rows_accepted"),
        "rows_quarantined": prepared.count("rows_quarantined"), "rows_duplicate": prepared.count("rows_duplicate"),
        "reuse_entries": len(prepared.reuse), "failed_cases": sum(prepared.failed_cases.values()),
        "meta_provenance": _meta_field(prepared, "provenance"),
        "meta_framework": _meta_field(prepared, "runtime", "framework"),
        "meta_image": _meta_field(prepared, "runtime", "image"),
        "meta_image_digest": _meta_field(prepared, "runtime", "image_digest"),
        "started_at": prepared.started_at, "finished_at": datetime.now(timezone.utc),
    }


def _batch_table_rows(prepared: PreparedBatch) -> pl.DataFrame:
    rows = []
    for name, table in prepared.tables.items():
        meta = ((prepared.meta.get("tables") or {}).get(name) or {})
        meta = meta if isinstance(meta, dict) else {}
        rows.append({
            "batch_id": prepared.batch_id, "table": name, "system": prepared.source.system,
            "family": table.curated["family"][0] if table.curated.height else prepared.source.family,
            "backend": prepared.source.backend, "version": prepared.source.version,
            "rows_in": table.rows_in, "rows_accepted": table.rows_accepted,
            "rows_quarantined": table.rows_quarantined, "rows_duplicate": table.rows_duplicate,
            "meta_status": meta.get("status"), "meta_collected_at": _text(meta.get("collected_at")),
            "meta_rows": meta.get("rows"), "meta_collector_hash": meta.get("collector_hash"),
            "meta_case_plan_hash": meta.get("case_plan_hash"),
            "meta_image": _meta_field(prepared, "runtime", "image"),
            "failed_cases": sum(prepared.failed_cases.values()),
        })
    schema = {"rows_in": pl.Int64, "rows_accepted": pl.Int64, "rows_quarantined": pl.Int64,
              "rows_duplicate": pl.Int64, "meta_rows": pl.Int64, "failed_cases": pl.Int64}
    return pl.DataFrame(rows, schema_overrides=schema, infer_schema_length=None) if rows else pl.DataFrame()


def _text(value: object) -> str | None:
    return None if value is None else str(value)
