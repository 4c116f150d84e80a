"""Resume checkpoints: one JSON per op at <out>/collector_checkpoint/<backend>/<backend>.<op>.json.

The checkpoint is bound to (backend, op, table, framework version, SM): resuming against another runtime
would mislabel rows, so it is refused. Ids are the stable task ids of case_grid.task_id.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from perfledger.collector.failures import atomic_write_text

SCHEMA = "perfledger-resume-v1"
BINDING = ("backend", "op", "table", "framework_version", "sm_version")


class CheckpointError(ValueError):
    """A checkpoint is unreadable or bound to another runtime."""


def checkpoint_path(out: Path, backend: str, op: str) -> Path:
    return Path(out) / "collector_checkpoint" / backend / f"{backend}.{op}.json"


@dataclass
class Checkpoint:
    path: Path
    backend: str
    op: str
    table: str
    framework_version: str
    sm_version: int | None
    done: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    min_interval_s: float = 1.0
    _last_write: float = 0.0

    def binding(self) -> dict:
        return {k: getattr(self, k) for k in BINDING}

    def mark(self, task_id: str, ok: bool) -> None:
        (self.done if ok else self.failed).add(task_id)
        (self.failed if ok else self.done).discard(task_id)
        self.save()

    def save(self, *, force: bool = False) -> None:
        """Atomic write, rate-limited to one per `min_interval_s` unless forced."""
        now = time.monotonic()
        if not force and now - self._last_write < self.min_interval_s:
            return
        doc = {
            "schema": SCHEMA,
            **self.binding(),
            "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "done": sorted(self.done),
            "failed": sorted(self.failed),
        }
        atomic_write_text(self.path, json.dumps(doc, indent=1) + "\n")
        self._last_write = now


def load_checkpoint(path: Path) -> dict:
    try:
        doc = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
    if doc.get("schema") != SCHEMA:
        raise CheckpointError(f"{path}: schema {doc.get('schema')!r}, expected {SCHEMA!r}")
    for key in (*BINDING, "done", "failed"):
        if key not in doc:
            raise CheckpointError(f"{path}: missing key {key!r}")
    return doc


def open_checkpoint(
    out: Path, *, backend: str, op: str, table: str, framework_version: str, sm_version: int | None,
    resume: bool, retry_failed: bool = False,
) -> Checkpoint:
    """Fresh checkpoint, or (with resume) the stored one after checking its runtime binding.

    Without resume an existing checkpoint is an error: appending a second run to the same staging files
    would duplicate rows silently.
    """
    path = checkpoint_path(out, backend, op)
    cp = Checkpoint(path, backend, op, table, framework_version, sm_version)
    if not path.exists():
        return cp
    if not resume:
        raise CheckpointError(
            f"{path} exists: {out} already holds a run of {backend}.{op}; pass --resume or use a fresh --out"
        )
    doc = load_checkpoint(path)
    mismatched = {k: (doc[k], v) for k, v in cp.binding().items() if doc[k] != v}
    if mismatched:
        detail = ", ".join(f"{k}: checkpoint {a!r} vs runtime {b!r}" for k, (a, b) in mismatched.items())
        raise CheckpointError(f"{path}: cannot resume on another runtime ({detail})")
    cp.done = set(doc["done"])
    cp.failed = set() if retry_failed else set(doc["failed"])
    return cp
