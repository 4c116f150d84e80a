"""Locked append-only staging CSV writer (`<table>_perf.txt`), same dialect as the reference collector.

Dialect (matches ../shared/collected): comma separated, header row first, CRLF line ends, minimal quoting,
floats as Python repr. The first header written freezes the schema: an append with other columns is refused
before anything is written. Every row is written, flushed and fsynced under the lock; any failure raises
StagingError, so the caller fails the task instead of losing the row.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfledger.collector.lockfile import FileLock, LockStats, LockTimeout

PREFIX = ("framework", "version", "device", "op_name", "kernel_source")
LINE_END = "\r\n"


class StagingError(RuntimeError):
    """A staging row could not be persisted (lock, schema mismatch or IO)."""


@dataclass(frozen=True)
class RowContext:
    """The five leading descriptive columns shared by every row of one task."""

    framework: str
    version: str
    device: str
    op_name: str
    kernel_source: str

    def values(self) -> list[str]:
        return [self.framework, self.version, self.device, self.op_name, self.kernel_source]


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def encode_line(values: Sequence[Any]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator=LINE_END).writerow([_cell(v) for v in values])
    return buf.getvalue()


def _existing_header(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            first = fh.readline()
    except FileNotFoundError:
        return None
    return first.decode().rstrip("\r\n") if first else None


def append_rows(
    path: Path,
    context: RowContext,
    rows: Iterable[dict[str, Any]],
    *,
    lock_timeout_s: float = 120.0,
    stale_after_s: float = 60.0,
) -> LockStats:
    """Append rows (ordered dicts of the op's columns, ending with `latency`) under the lock.

    All rows must share the same keys; the header is PREFIX + those keys. Returns the lock statistics.
    """
    rows = list(rows)
    if not rows:
        return LockStats()
    payload = list(rows[0])
    for i, row in enumerate(rows):
        if list(row) != payload:
            raise StagingError(f"{path}: row {i} has columns {list(row)}, expected {payload}")
    header = encode_line([*PREFIX, *payload]).rstrip(LINE_END)
    lock = FileLock(path, timeout_s=lock_timeout_s, stale_after_s=stale_after_s)
    try:
        with lock:
            found = _existing_header(path)
            if found is not None and found != header:
                raise StagingError(f"{path}: schema mismatch: file header is {found!r}, rows need {header!r}")
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                if found is None:
                    _write_all(fd, header + LINE_END)
                for row in rows:
                    _write_all(fd, encode_line([*context.values(), *row.values()]))
            finally:
                os.close(fd)
    except LockTimeout as exc:
        raise StagingError(str(exc)) from exc
    except OSError as exc:
        raise StagingError(f"{path}: write failed: {exc}") from exc
    return lock.stats


def _write_all(fd: int, text: str) -> None:
    """One write per line (O_APPEND keeps it contiguous), then fsync: the row is on disk or we raise."""
    data = text.encode()
    written = os.write(fd, data)
    if written != len(data):
        raise OSError(f"short write ({written} of {len(data)} bytes)")
    os.fsync(fd)


def count_rows(path: Path) -> int:
    """Data rows in a staging file (lines after the header)."""
    try:
        with open(path, "rb") as fh:
            return max(sum(1 for line in fh if line.strip()) - 1, 0)
    except FileNotFoundError:
        return 0
