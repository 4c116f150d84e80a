"""Read, normalise and validate one batch in memory; nothing is written here.

A batch either prepares completely or raises `BatchError` naming the file (and line) at fault, so
a bad file never reaches the warehouse. Sidecars are parsed and their shapes checked here too, so
every value the commit writes is known good before the first write. Every byte a preparation parses
comes from the batch's contents (`read_contents`: read where the files are), so the same preparation
runs on a worker that cannot see the source folder (flows/partitioned.py ships the contents).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from perfledger.safe_io import MAX_SIDECAR_BYTES, InputFileError, load_json, load_yaml, quoted, read_bytes
from perfledger.schemas.catalog import Catalog, CatalogError
from perfledger.warehouse.discover import BatchSource, table_of
from perfledger.warehouse.layout import record_layout
from perfledger.warehouse.normalise import RENAMED_SUFFIX, Lineage, NormalisedTable, TypedFile, type_file
from perfledger.warehouse.readers import read_source_file


class BatchError(ValueError):
    """The batch cannot be ingested; the message names the file and what is wrong."""


Contents = Mapping[Path, bytes]  # every file of a batch (tables and sidecars) as bytes, by its path where it was read


def read_contents(batch: BatchSource) -> dict[Path, bytes]:
    """Every file of the batch as bytes (sidecars within the sidecar cap): all its preparation reads."""
    try:
        return {**{path: read_bytes(path) for path in batch.files},
                **{path: read_bytes(path, MAX_SIDECAR_BYTES) for path in batch.sidecars}}
    except InputFileError as exc:
        raise BatchError(str(exc)) from None


@dataclass
class PreparedBatch:
    """A batch read and typed in memory; `tables` is filled once its window is validated."""

    source: BatchSource
    typed: dict[str, TypedFile]
    meta: dict
    reuse: list[dict]
    failures: list[dict]
    started_at: datetime
    warnings: list[str] = field(default_factory=list)
    tables: dict[str, NormalisedTable] = field(default_factory=dict)
    layouts: dict[str, dict] = field(default_factory=dict)   # per table: the file's layout (warehouse.layout)
    sidecar_files: dict[str, bytes] = field(default_factory=dict)  # a tree batch's sidecars as received

    @property
    def batch_id(self) -> str:
        return self.source.batch_id

    def failed_cases(self, table: str | None = None) -> int:
        """Failed collector cases, for one table or the whole batch."""
        return sum(1 for f in self.failures if table is None or f["table"] == table)

    @property
    def rows_in(self) -> int:
        return sum(t.rows_in for t in self.typed.values()) + sum(t.rows_in for t in self.tables.values())

    def count(self, attribute: str) -> int:
        return sum(getattr(t, attribute) for t in self.tables.values())


_NULL_TEXT = {"", "~", "null", "Null", "NULL"}
META_TABLE_FIELDS = ("status", "collected_at", "collector_hash", "case_plan_hash")
RUNTIME_FIELDS = ("framework", "version", "image", "image_digest")
REUSE_FIELDS = ("table", "from_version", "reason", "approved_by")


def _mapping(path: Path, data: bytes) -> dict:
    """A sidecar that must hold a mapping (an empty file is an empty one)."""
    try:
        loaded = load_yaml(path, data=data)
    except InputFileError as exc:
        raise BatchError(str(exc)) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise BatchError(f"{path}: expected a mapping at the top level, found a {_shape(loaded)}")
    return loaded


def _shape(value: object) -> str:
    return "list" if isinstance(value, list) else "mapping" if isinstance(value, dict) else "value"


def _is_null(value: object) -> bool:
    return value is None or (isinstance(value, str) and value.strip() in _NULL_TEXT)


def _text(value: object, where: str) -> str | None:
    """A scalar field as its text (YAML nulls as None); a list or mapping is an error naming the field."""
    if _is_null(value):
        return None
    if isinstance(value, (dict, list)):
        raise BatchError(f"{where}: expected a single value, found a {_shape(value)}")
    return str(value)


def _count(value: object, where: str) -> int | None:
    text = _text(value, where)
    if text is None:
        return None
    if not text.strip().isdigit() or len(text) > 18:
        raise BatchError(f"{where}: expected a row count (a whole number), found {quoted(text)}")
    return int(text)


def collection_meta(path: Path, data: bytes) -> dict:
    """collection_meta.yaml checked and reduced to what the warehouse records (all text, rows as int)."""
    raw = _mapping(path, data)
    runtime, tables = ({} if _is_null(raw.get(k)) else raw[k] for k in ("runtime", "tables"))
    for name, value in (("runtime", runtime), ("tables", tables)):
        if not isinstance(value, dict):
            raise BatchError(f"{path}: '{name}' must be a mapping, found a {_shape(value)}")
    meta_tables = {}
    for table, entry in tables.items():
        entry = {} if _is_null(entry) else entry
        if not isinstance(entry, dict):
            raise BatchError(f"{path}: tables.{table} must be a mapping, found a {_shape(entry)}")
        meta_tables[str(table)] = {
            **{k: _text(entry.get(k), f"{path}: tables.{table}.{k}") for k in META_TABLE_FIELDS},
            "rows": _count(entry.get("rows"), f"{path}: tables.{table}.rows"),
        }
    return {"provenance": _text(raw.get("provenance"), f"{path}: provenance"),
            "runtime": {k: _text(runtime.get(k), f"{path}: runtime.{k}") for k in RUNTIME_FIELDS},
            "tables": meta_tables}


def _reuse_entries(path: Path, data: bytes) -> list[dict]:
    raw = _mapping(path, data)
    if "reuse" not in raw or not isinstance(raw["reuse"], list):
        raise BatchError(f"{path}: missing 'reuse:' list")
    entries = []
    for i, entry in enumerate(raw["reuse"]):
        if not isinstance(entry, dict):
            raise BatchError(f"{path}: reuse entry {i + 1} must be a mapping, found a {_shape(entry)}")
        values = {k: _text(entry.get(k), f"{path}: reuse entry {i + 1}: {k}") for k in REUSE_FIELDS}
        missing = [k for k, v in values.items() if not (v or "").strip()]
        if missing:
            raise BatchError(f"{path}: reuse entry {i + 1} lacks {missing}")
        entries.append(values)
    return entries


def _json(path: Path, data: bytes) -> object:
    try:
        return load_json(path, data)
    except InputFileError as exc:
        raise BatchError(str(exc)) from None


def _error_records(path: Path, data: bytes) -> list[dict]:
    records = _json(path, data)
    if not isinstance(records, list):
        raise BatchError(f"{path}: expected a list of failure records, found a {_shape(records)}")
    failures = []
    for i, record in enumerate(records):
        where = f"{path}: record {i + 1}"
        if not isinstance(record, dict):
            raise BatchError(f"{where}: expected an object, found a {_shape(record)}")
        failures.append({
            "table": _text(record.get("table"), f"{where}: table"),
            "op": _text(record.get("op", path.stem.removeprefix("errors_")), f"{where}: op"),
            "task_id": str(_text(record.get("task_id"), f"{where}: task_id")),
            "classification": _text(record.get("classification"), f"{where}: classification"),
            "message": _text(record.get("message"), f"{where}: message"), "source": path.name})
    return failures


def _checkpoint_failures(path: Path, data: bytes) -> list[dict]:
    checkpoint = _json(path, data)
    if not isinstance(checkpoint, dict):
        raise BatchError(f"{path}: expected a collector checkpoint object, found a {_shape(checkpoint)}")
    failed = checkpoint.get("failed") or []
    if not isinstance(failed, list):
        raise BatchError(f"{path}: 'failed' must be a list of case ids, found {quoted(failed)}")
    table = _text(checkpoint.get("table"), f"{path}: table")
    op = _text(checkpoint.get("module") or checkpoint.get("op") or path.stem, f"{path}: module")
    return [{"table": table, "op": op, "task_id": _text(task_id, f"{path}: failed[{i}]"), "classification": None,
             "message": None, "source": path.name} for i, task_id in enumerate(failed)]


def collection_failures(sidecars: list[Path], contents: Contents) -> list[dict]:
    """Every failed collector case: from errors_*.json records, else from resume checkpoints' `failed` ids.

    A failed case is data ("attempted and failed" differs from "never attempted"), so each is kept.
    """
    errors = [p for p in sidecars if p.name.startswith("errors_") and p.suffix == ".json"]
    if errors:
        return [failure for path in errors for failure in _error_records(path, contents[path])]
    checkpoints = [p for p in sidecars if p.parent.parent.name == "collector_checkpoint"]
    return [failure for path in checkpoints for failure in _checkpoint_failures(path, contents[path])]


def _check_meta_rows(meta: dict, table: str, rows_in: int, source: BatchSource) -> None:
    declared = meta["tables"].get(table, {}).get("rows") if meta else None
    if declared is not None and declared != rows_in:
        raise BatchError(f"{source.folder / 'collection_meta.yaml'}: tables.{table}.rows says {declared}, "
                         f"but the file holds {rows_in} rows")


def prepare_batch(batch: BatchSource, catalog: Catalog, contents: Contents | None = None) -> PreparedBatch:
    """Type every file of the batch from its contents (read here when not given); raise BatchError on
    the first unusable file."""
    started = datetime.now(UTC)
    contents = read_contents(batch) if contents is None else contents
    meta_path = batch.folder / "collection_meta.yaml"
    meta = collection_meta(meta_path, contents[meta_path]) if meta_path in batch.sidecars else {}
    reuse_path = batch.folder / "reuse.yaml"
    reuse = _reuse_entries(reuse_path, contents[reuse_path]) if batch.kind == "tree" and reuse_path in batch.sidecars else []
    failures = collection_failures(batch.sidecars, contents)
    typed: dict[str, TypedFile] = {}
    layouts: dict[str, dict] = {}
    warnings: list[str] = []
    for file in batch.files:
        table = table_of(file)
        try:
            spec = catalog.table(table)
            lineage = Lineage(batch.batch_id, batch.system, batch.family or spec.family, batch.backend,
                              batch.version, _display(file, batch), started)
            raw = read_source_file(file, contents[file])
            layouts[table] = {**record_layout(file, raw, contents[file]), "source_file": lineage.source_file}
            typed[table] = type_file(raw, spec, catalog, lineage)
        except (InputFileError, CatalogError) as exc:
            raise BatchError(str(exc)) from None
        _check_meta_rows(meta, table, typed[table].rows_in, batch)
        if typed[table].renamed_columns:
            kept = [c + RENAMED_SUFFIX for c in typed[table].renamed_columns]
            warnings.append(f"{file.name}: columns {quoted(typed[table].renamed_columns)} are reserved for lineage; "
                            f"their values are kept as {quoted(kept)}")
        if typed[table].extra_columns:
            warnings.append(f"{file.name}: extra columns kept as text: {quoted(typed[table].extra_columns)}")
    sidecars = {path.name: contents[path] for path in batch.sidecars} if batch.kind == "tree" else {}
    return PreparedBatch(batch, typed, meta, reuse, failures, started, warnings, layouts=layouts, sidecar_files=sidecars)


def _display(file: Path, batch: BatchSource) -> str:
    """The file's name as stored in lineage: relative to the batch's layout root where there is one."""
    if batch.kind == "tree":
        return "/".join([batch.system, batch.family or "", batch.backend, batch.version, file.name])
    return str(file)
