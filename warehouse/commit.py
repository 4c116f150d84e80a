"""The commit buffer: prepared batches in, Delta commits out.

Curated slices are flushed after each validation window (bounded memory, few commits); the raw
input files are kept under `raw/<batch_id>/`; findings (quarantine, advisories, duplicates), reuse
declarations, failures, batch_tables and finally the `batches` record are written at close. The
ingest runs all of it inside one commit unit (Warehouse.unit), so a batch's writes are visible all
together or not at all; every value written here was checked when the batch was prepared.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime

import polars as pl

from perfledger.schemas.catalog import load_catalog
from perfledger.settings import ObjectLocation
from perfledger.warehouse import objects
from perfledger.warehouse.layout import LAYOUT_SCHEMA, LAYOUT_TABLE
from perfledger.warehouse.normalise import NormalisedTable
from perfledger.warehouse.prepare import PreparedBatch
from perfledger.warehouse.store import SLICE_COLUMNS, Warehouse

FINDING_SLICE = ("table", "system", "backend", "version")
FINDING_TABLES = ("quarantine", "advisories", "duplicates")
REUSE_SLICE = ("system", "family", "backend", "version")
SIDECAR_TABLE = "sidecars"
SIDECAR_SCHEMA = {"system": pl.String, "family": pl.String, "backend": pl.String, "version": pl.String,
                  "batch_id": pl.String, "name": pl.String, "content": pl.Binary}

SliceKey = tuple[str, str, str]


class CommitBuffer:
    """Collect prepared batches and write them; a later batch for the same slice supersedes an earlier one."""

    def __init__(self, warehouse: Warehouse):
        self.warehouse = warehouse
        self.curated: dict[str, dict[SliceKey, pl.DataFrame]] = {}
        self.findings: dict[tuple[str, *SliceKey], NormalisedTable] = {}
        self.layouts: dict[tuple[str, *SliceKey], dict] = {}
        self.batches: list[PreparedBatch] = []

    def add_window(self, window: list[PreparedBatch]) -> None:
        """Take a validated window and write its curated slices (one commit per table)."""
        for prepared in window:
            src = prepared.source
            key: SliceKey = (src.system, src.backend, src.version)
            self.batches.append(prepared)
            for table, normalised in list(prepared.tables.items()):
                self.curated.setdefault(table, {})[key] = normalised.curated
                prepared.tables[table] = self.findings[(table, *key)] = normalised.without_curated()
                self.layouts[(table, *key)] = {**prepared.layouts[table], "table": table, "system": src.system,
                                               "backend": src.backend, "version": src.version,
                                               "batch_id": prepared.batch_id}
        for table in sorted(self.curated):
            self._flush_table(table)

    def _flush_table(self, table: str) -> None:
        slices = self.curated.pop(table, {})
        if slices:
            frame = pl.concat(list(slices.values()), how="diagonal_relaxed")
            with self.warehouse.labelled("ingest", frame["batch_id"].unique().to_list()):
                self.warehouse.replace_slices(self.warehouse.curated_uri(table), frame, SLICE_COLUMNS, list(slices),
                                              partition_by=SLICE_COLUMNS)

    def close(self) -> None:
        """Flush everything; the `batches` record goes last (a batch counts only once all its rows are in)."""
        if not self.batches:
            return
        with self.warehouse.labelled("ingest", [p.batch_id for p in self.batches]):
            self._write_batches()
        self.batches, self.findings, self.layouts = [], {}, {}

    def _write_batches(self) -> None:
        keep_raw_inputs(self.warehouse, self.batches)
        for name in FINDING_TABLES if self.findings else ():
            frames = [getattr(normalised, name).with_columns(pl.lit(key[0]).alias("table"))
                      for key, normalised in self.findings.items()]
            self.warehouse.replace_slices(self.warehouse.table_uri(name), pl.concat(frames, how="diagonal_relaxed"),
                                          FINDING_SLICE, list(self.findings), partition_by=["table"])
        if self.layouts:
            self.warehouse.replace_slices(self.warehouse.table_uri(LAYOUT_TABLE),
                                          pl.DataFrame(list(self.layouts.values()), schema=LAYOUT_SCHEMA),
                                          FINDING_SLICE, list(self.layouts))
        self._write_reuse()
        self._write_sidecars()
        self._write_failures()
        per_table = [rows for rows in map(_batch_table_rows, self.batches) if rows.height]
        if per_table:
            self.warehouse.write_table("batch_tables", pl.concat(per_table, how="diagonal_relaxed"))
        self.warehouse.write_table("batches", pl.DataFrame([_batch_row(p) for p in self.batches]))

    def _write_reuse(self) -> None:
        tree = [p for p in self.batches if p.source.kind == "tree"]
        if not tree:
            return
        rows = [{"system": p.source.system, "family": p.source.family, "backend": p.source.backend,
                 "version": p.source.version, "batch_id": p.batch_id, **entry} for p in tree for entry in p.reuse]
        schema = {c: pl.String for c in (*REUSE_SLICE, "batch_id", "table", "from_version", "reason", "approved_by")}
        clear = [(p.source.system, p.source.family, p.source.backend, p.source.version) for p in tree]
        self.warehouse.replace_slices(self.warehouse.table_uri("reuse"), pl.DataFrame(rows, schema=schema), REUSE_SLICE,
                                      clear)

    def _write_sidecars(self) -> None:
        """A tree batch's collection_meta.yaml, reuse.yaml and errors_*.json as received (the export's source)."""
        tree = [p for p in self.batches if p.source.kind == "tree"]
        if not tree:
            return
        rows = [{"system": p.source.system, "family": p.source.family, "backend": p.source.backend,
                 "version": p.source.version, "batch_id": p.batch_id, "name": name, "content": content}
                for p in tree for name, content in p.sidecar_files.items()]
        clear = [(p.source.system, p.source.family, p.source.backend, p.source.version) for p in tree]
        self.warehouse.replace_slices(self.warehouse.table_uri(SIDECAR_TABLE), pl.DataFrame(rows, schema=SIDECAR_SCHEMA),
                                      REUSE_SLICE, clear)

    def _write_failures(self) -> None:
        staging = [p for p in self.batches if p.source.kind == "staging"]
        if not staging:
            return
        rows = [{"system": p.source.system, "backend": p.source.backend, "version": p.source.version,
                 "batch_id": p.batch_id, **failure} for p in staging for failure in p.failures]
        schema = {c: pl.String for c in (*SLICE_COLUMNS, "batch_id", "table", "op", "task_id", "classification",
                                         "message", "source")}
        slices = [(p.source.system, p.source.backend, p.source.version) for p in staging]
        self.warehouse.replace_slices(self.warehouse.table_uri("collection_failures"), pl.DataFrame(rows, schema=schema),
                                      SLICE_COLUMNS, slices)


def keep_raw_inputs(warehouse: Warehouse, batches: list[PreparedBatch]) -> None:
    """Copy each batch's files as received to `raw/<batch_id>/` (content-addressed, written once, atomically).
    On object storage each file is one put; the unit's journal names the folders, so a rollback removes
    a partial copy, and nothing reads raw/ of a batch the `batches` table does not record."""
    raw = warehouse.root / "raw"
    if isinstance(raw, ObjectLocation):
        todo = [p for p in batches if not objects.exists(raw / p.batch_id)]
        warehouse.before_creating([raw / p.batch_id for p in todo])
        for prepared in todo:
            for path in [*prepared.source.files, *prepared.source.sidecars]:
                objects.upload(raw / prepared.batch_id / path.relative_to(prepared.source.folder).as_posix(), path)
        return
    todo = [p for p in batches if not (raw / p.batch_id).exists()]
    warehouse.before_creating([folder for p in todo for folder in (raw / p.batch_id, raw / f".{p.batch_id}.partial")])
    for prepared in todo:
        partial = raw / f".{prepared.batch_id}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        for path in [*prepared.source.files, *prepared.source.sidecars]:
            relative = path.relative_to(prepared.source.folder)
            (partial / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, partial / relative)
        partial.rename(raw / prepared.batch_id)


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
        "reuse_entries": len(prepared.reuse), "failed_cases": prepared.failed_cases(),
        "meta_provenance": _meta_field(prepared, "provenance"),
        "meta_framework": _meta_field(prepared, "runtime", "framework"),
        "meta_image": _meta_field(prepared, "runtime", "image"),
        "meta_image_digest": _meta_field(prepared, "runtime", "image_digest"),
        "started_at": prepared.started_at, "finished_at": datetime.now(UTC),
    }


def _batch_table_rows(prepared: PreparedBatch) -> pl.DataFrame:
    rows = []
    for name, table in prepared.tables.items():
        meta = (prepared.meta.get("tables") or {}).get(name) or {}
        meta = meta if isinstance(meta, dict) else {}
        rows.append({
            "batch_id": prepared.batch_id, "table": name, "system": prepared.source.system, "family": table.family,
            "backend": prepared.source.backend, "version": prepared.source.version,
            "rows_in": table.rows_in, "rows_accepted": table.rows_accepted,
            "rows_quarantined": table.rows_quarantined, "rows_duplicate": table.rows_duplicate,
            "meta_status": _text(meta.get("status")), "meta_collected_at": _text(meta.get("collected_at")),
            "meta_rows": meta.get("rows"), "meta_collector_hash": _text(meta.get("collector_hash")),
            "meta_case_plan_hash": _text(meta.get("case_plan_hash")),
            "meta_image": _meta_field(prepared, "runtime", "image"),
            "failed_cases": prepared.failed_cases(name),
        })
    catalog = load_catalog()
    for name in sorted({f["table"] for f in prepared.failures if f["table"]} - set(prepared.tables)):
        if name in catalog.tables:  # every case of the table failed: no file, but the attempt is recorded
            rows.append({"batch_id": prepared.batch_id, "table": name, "system": prepared.source.system,
                         "family": catalog.table(name).family, "backend": prepared.source.backend,
                         "version": prepared.source.version, "rows_in": 0, "rows_accepted": 0,
                         "rows_quarantined": 0, "rows_duplicate": 0, "failed_cases": prepared.failed_cases(name)})
    schema = {"rows_in": pl.Int64, "rows_accepted": pl.Int64, "rows_quarantined": pl.Int64,
              "rows_duplicate": pl.Int64, "meta_rows": pl.Int64, "failed_cases": pl.Int64}
    return pl.DataFrame(rows, schema_overrides=schema, infer_schema_length=None) if rows else pl.DataFrame()


def _text(value: object) -> str | None:
    return None if value is None else str(value)
