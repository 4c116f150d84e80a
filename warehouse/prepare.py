"""Read, normalise and validate one batch in memory; nothing is written here.

A batch either prepares completely or raises `BatchError` naming the file (and line) at fault, so
a bad file never reaches the warehouse.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import yaml

from perfledger.schemas.catalog import Catalog, CatalogError
from perfledger.warehouse.discover import BatchSource, table_of
from perfledger.warehouse.normalise import Lineage, NormalisedTable, TypedFile, type_file
from perfledger.warehouse.readers import SourceFileError, read_source_file


class BatchError(ValueError):
    """The batch cannot be ingested; the message names the file and what is wrong."""


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


def _load_yaml(path: Path) -> dict:
    try:
        loaded = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise BatchError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(loaded, dict):
        raise BatchError(f"{path}: expected a mapping at the top level")
    return loaded


def _reuse_entries(path: Path) -> list[dict]:
    raw = _load_yaml(path)
    if "reuse" not in raw or not isinstance(raw["reuse"], list):
        raise BatchError(f"{path}: missing 'reuse:' list")
    entries = []
    for i, entry in enumerate(raw["reuse"]):
        missing = [k for k in ("table", "from_version", "reason", "approved_by") if not str((entry or {}).get(k, "")).strip()]
        if missing:
            raise BatchError(f"{path}: reuse entry {i + 1} lacks {missing}")
        entries.append({k: str(entry[k]) for k in ("table", "from_version", "reason", "approved_by")})
    return entries


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise BatchError(f"{path}: not valid JSON ({exc})") from None


def collection_failures(sidecars: list[Path]) -> list[dict]:
    """Every failed collector case: from errors_*.json records, else from resume checkpoints' `failed` ids.

    A failed case is data ("attempted and failed" differs from "never attempted"), so each is kept.
    """
    errors = [p for p in sidecars if p.name.startswith("errors_") and p.suffix == ".json"]
    failures: list[dict] = []
    for path in errors:
        records = _json(path)
        if not isinstance(records, list):
            raise BatchError(f"{path}: expected a list of failure records")
        for record in records:
            failures.append({"table": record.get("table"), "op": record.get("op", path.stem.removeprefix("errors_")),
                             "task_id": str(record.get("task_id")), "classification": record.get("classification"),
                             "message": record.get("message"), "source": path.name})
    if errors:
        return failures
    for path in (p for p in sidecars if p.parent.parent.name == "collector_checkpoint"):
        data = _json(path)
        if isinstance(data, dict):
            for task_id in data.get("failed") or []:
                failures.append({"table": data.get("table"), "op": str(data.get("module") or data.get("op") or path.stem),
                                 "task_id": str(task_id), "classification": None, "message": None, "source": path.name})
    return failures


def _check_meta_rows(meta: dict, table: str, rows_in: int, source: BatchSource) -> None:
    entry = (meta.get("tables") or {}).get(table) or {}
    declared = entry.get("rows") if isinstance(entry, dict) else None
    if declared is not None and int(declared) != rows_in:
        raise BatchError(f"{source.folder / 'collection_meta.yaml'}: tables.{table}.rows says {declared}, "
                         f"but the file holds {rows_in} rows")


def prepare_batch(batch: BatchSource, catalog: Catalog) -> PreparedBatch:
    """Read and type every file of the batch; raise BatchError on the first unusable file."""
    started = datetime.now(timezone.utc)
    meta_path = batch.folder / "collection_meta.yaml"
    meta = _load_yaml(meta_path) if meta_path.exists() else {}
    reuse_path = batch.folder / "reuse.yaml"
    reuse = _reuse_entries(reuse_path) if batch.kind == "tree" and reuse_path.exists() else []
    typed: dict[str, TypedFile] = {}
    warnings: list[str] = []
    for file in batch.files:
        table = table_of(file)
        try:
            spec = catalog.table(table)
            lineage = Lineage(batch.batch_id, batch.system, batch.family or spec.family, batch.backend,
                              batch.version, _display(file, batch), started)
            typed[table] = type_file(read_source_file(file), spec, catalog, lineage)
        except (SourceFileError, CatalogError) as exc:
            raise BatchError(str(exc)) from None
        _check_meta_rows(meta, table, typed[table].rows_in, batch)
        if typed[table].extra_columns:
            warnings.append(f"{file.name}: extra columns kept as text: {typed[table].extra_columns}")
    return PreparedBatch(batch, typed, meta, reuse, collection_failures(batch.sidecars), started, warnings)


def _display(file: Path, batch: BatchSource) -> str:
    """The file's name as stored in lineage: relative to the batch's layout root where there is one."""
    if batch.kind == "tree":
        return "/".join([batch.system, batch.family or "", batch.backend, batch.version, file.name])
    return str(file)
