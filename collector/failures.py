"""Failure records: classify an error message (rules in classification.yaml) and persist errors_<backend>.<op>.json."""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

CLASSES = ("oom", "illegal_address", "kernel_limit", "int32_guard", "timeout", "crash", "unexpected")
MESSAGE_LIMIT = 8000


@lru_cache(maxsize=1)
def _rules() -> tuple[tuple[str, tuple[re.Pattern, ...]], ...]:
    doc = yaml.safe_load(resources.files("perfledger.collector").joinpath("classification.yaml").read_text())
    rules = []
    for i, entry in enumerate(doc["classes"]):
        if entry.get("name") not in CLASSES:
            raise ValueError(f"collector/classification.yaml: classes[{i}].name={entry.get('name')!r} not in {CLASSES}")
        rules.append((entry["name"], tuple(re.compile(p, re.IGNORECASE) for p in entry["patterns"])))
    return tuple(rules)


def classify(error_type: str, message: str) -> str:
    """Coarse machine-readable class of a failure (first matching rule; `unexpected` otherwise)."""
    text = f"{error_type}: {message}"
    for name, patterns in _rules():
        if any(p.search(text) for p in patterns):
            return name
    return "unexpected"


@dataclass(frozen=True)
class FailureRecord:
    """One failed case: what ran where, how it failed, and when."""

    backend: str
    op: str
    table: str
    task_id: str
    case: dict[str, Any]
    device: int | None
    error_type: str
    classification: str
    message: str
    exit_code: int | None
    timestamp: str


def make_record(
    *, backend: str, op: str, table: str, task_id: str, case: dict, device: int | None,
    error_type: str, message: str, exit_code: int | None = None,
) -> FailureRecord:
    message = message if len(message) <= MESSAGE_LIMIT else "…" + message[-MESSAGE_LIMIT:]
    return FailureRecord(
        backend=backend, op=op, table=table, task_id=task_id, case=dict(case), device=device,
        error_type=error_type, classification=classify(error_type, message), message=message,
        exit_code=exit_code, timestamp=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def errors_path(out: Path, backend: str, op: str) -> Path:
    return Path(out) / f"errors_{backend}.{op}.json"


def atomic_write_text(path: Path, text: str) -> None:
    """Temp file in the same dir + fsync + os.replace: readers see the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_errors(path: Path) -> list[dict]:
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of failure records")
    return data


def write_errors(path: Path, records: list[FailureRecord | dict]) -> None:
    """Write the op's failure list (one record per failed task id, latest attempt wins)."""
    by_id: dict[str, dict] = {}
    for rec in records:
        item = asdict(rec) if isinstance(rec, FailureRecord) else rec
        by_id[item["task_id"]] = item
    atomic_write_text(path, json.dumps(list(by_id.values()), indent=1) + "\n")
