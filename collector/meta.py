"""Batch identity (`batch.yaml`) and provenance (`collection_meta.yaml`) beside the staging files.

batch.yaml: {system, backend, version} — how ingest identifies the batch. collection_meta.yaml: runtime
facts plus, per table, the collector code hash, case plan hash, date, staging row count and status
(complete when every planned case was attempted, partial otherwise). Both merge with what an earlier
invocation into the same folder wrote, and refuse to mix runtimes in one folder.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from importlib import import_module
from pathlib import Path
from typing import Any

import yaml

from perfledger.collector.failures import atomic_write_text

SCHEMA_VERSION = 1
SHARED_CORE = ("case_grid.py", "execute.py", "staging.py", "lockfile.py", "registry.py", "registry.yaml",
               "backends/base.py", "ops/__init__.py")


class MetaError(ValueError):
    """The output folder already belongs to another batch/runtime."""


def collector_hash(op_module: str, backend: str, cases_name: str, grid_path: Path | None = None) -> str:
    """sha256 over sorted (relative path, bytes) of the op module, its grid, its backend and the shared core."""
    root = Path(__file__).resolve().parent
    backend_mod = import_module(f"perfledger.collector.backends.{'cpu' if backend == 'cpu' else 'torch_cuda'}")
    files = {*(root / p for p in SHARED_CORE), Path(import_module(op_module).__file__),
             Path(grid_path).resolve() if grid_path else root / "cases" / f"{cases_name}.yaml",
             Path(backend_mod.__file__)}
    rel = lambda p: str(p.relative_to(root)) if p.is_relative_to(root) else f"grid:{p.name}"  # noqa: E731
    digest = hashlib.sha256()
    for path in sorted(files, key=rel):
        digest.update(rel(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return "sha256:" + digest.hexdigest()


def _load(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise MetaError(f"{path}: invalid YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise MetaError(f"{path}: expected a mapping")
    return doc


def write_batch(out: Path, *, system: str, backend: str, version: str) -> Path:
    """Write batch.yaml; an existing one with another identity is an error (one batch per folder)."""
    path = Path(out) / "batch.yaml"
    want = {"system": system, "backend": backend, "version": version}
    have = _load(path)
    if have and have != want:
        raise MetaError(f"{path}: folder holds batch {have}, this run is {want}; use another --out")
    atomic_write_text(path, yaml.safe_dump(want, sort_keys=False))
    return path


def update_meta(out: Path, runtime: dict[str, Any], table: str, entry: dict[str, Any]) -> Path:
    """Merge one table's provenance into collection_meta.yaml (runtime must match the stored one)."""
    path = Path(out) / "collection_meta.yaml"
    doc = _load(path)
    stored = doc.get("runtime") or {}
    for key in ("framework", "backend", "version", "device"):
        if stored and stored.get(key) != runtime.get(key):
            raise MetaError(f"{path}: runtime.{key} is {stored.get(key)!r}, this run has {runtime.get(key)!r}")
    tables = dict(doc.get("tables") or {})
    tables[table] = entry
    new = {"schema_version": SCHEMA_VERSION, "runtime": runtime, "tables": tables}
    atomic_write_text(path, yaml.safe_dump(new, sort_keys=False))
    return path


def table_entry(*, collector_hash: str, case_plan_hash: str, rows: int | None, planned: int, done: int,
                failed: int, ops: list[str], final: bool = True) -> dict[str, Any]:
    """`complete` only once the op finished with every planned case attempted (done or failed)."""
    return {
        "collector_hash": collector_hash,
        "case_plan_hash": case_plan_hash,
        "collected_at": datetime.now(UTC).date().isoformat(),
        "rows": rows,
        "status": "complete" if final and done + failed >= planned else "partial",
        "cases_planned": planned,
        "cases_done": done,
        "cases_failed": failed,
        "ops": ops,
    }
