"""Content keys: a stage whose inputs (files, warehouse table versions, parameters) are unchanged is skipped.

The key is a SHA-256 over a canonical JSON of the stage's inputs; the last key and result of every
stage live in `<out>/.pipeline/stages.json`, so a re-run with nothing new returns the stored result.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

STATE_FILE = Path(".pipeline") / "stages.json"


def file_digest(path: str | Path) -> str:
    """Content hash of a file or of every file under a folder (names + bytes); 'missing' when absent."""
    path = Path(path)
    digest = hashlib.sha256()
    if path.is_file():
        digest.update(path.read_bytes())
    elif path.is_dir():
        for item in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(str(item.relative_to(path)).encode() + b"\0" + item.read_bytes())
    else:
        return "missing"
    return digest.hexdigest()


def content_key(stage: str, *parts: Any) -> str:
    """The stage's key over JSON-able parts (paths given as file_digest values by the caller)."""
    blob = json.dumps([stage, *parts], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def warehouse_state(wh, names: tuple[str, ...]) -> dict[str, int | None]:
    """Versions of the warehouse tables a derived stage reads (each ingest commits `batches` last)."""
    return {name: wh.table_version(name) for name in names}


class StageCache:
    """Last key and result per stage under the output folder; written atomically."""

    def __init__(self, out: Path):
        self.path = Path(out) / STATE_FILE
        try:
            self.state: dict = json.loads(self.path.read_text()) if self.path.is_file() else {}
        except (OSError, json.JSONDecodeError):
            self.state = {}  # a damaged cache only costs a recomputation

    def run(self, stage: str, key: str, compute: Callable[[], Any]) -> tuple[Any, bool]:
        """(result, skipped): the stored result when the key matches, else compute and store."""
        entry = self.state.get(stage)
        if entry and entry.get("key") == key:
            return entry["result"], True
        result = compute()
        self.state[stage] = {"key": key, "result": result}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps(self.state, default=str, sort_keys=True))
        partial.replace(self.path)
        return result, False
