"""The run lock: one writer per warehouse at a time; a second one waits briefly, then says "busy".

Taking the lock also finishes what a crashed writer left: its open commit unit is rolled back
(warehouse.journal) before the new holder writes anything.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock, Timeout

from perfledger.warehouse.journal import recover

LOCK_NAME = ".perfledger.lock"


class WarehouseBusy(RuntimeError):
    """Another process holds the warehouse's run lock."""


class WarehouseUnwritable(PermissionError):
    """The warehouse folder cannot take the run lock (read-only, not a folder): nothing can be written."""


def _unwritable(root: Path, exc: OSError, detail: str = "") -> WarehouseUnwritable:
    return WarehouseUnwritable(f"cannot write warehouse {root}: {exc.strerror or exc}{detail}")


def check_writable(root: Path) -> None:
    """Raise WarehouseUnwritable now when `root` could not take the run lock, so a long job that will
    write fails before its first stage rather than at its first write."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        os.close(os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644))
    except OSError as exc:
        raise _unwritable(root, exc, " (cannot take its run lock)") from None


@contextmanager
def run_lock(root: Path, *, timeout_s: float = 5.0, purpose: str = "write") -> Iterator[None]:
    """Hold the warehouse's exclusive run lock (an OS lock: released even when the holder is killed)."""
    lock = FileLock(str(root / LOCK_NAME))
    holder = root / ".perfledger.lock.holder"
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock.acquire(timeout=timeout_s)
    except Timeout:
        who = holder.read_text() if holder.exists() else "unknown process"
        raise WarehouseBusy(f"warehouse {root} is busy: another run holds its lock ({who}); try again later") from None
    except OSError as exc:
        raise _unwritable(root, exc, " (cannot take its run lock)") from None
    try:
        try:
            holder.write_text(json.dumps({
                "pid": os.getpid(), "host": socket.gethostname(), "purpose": purpose,
                "since": datetime.now(UTC).isoformat(timespec="seconds"),
            }))
            recover(root)
        except OSError as exc:
            raise _unwritable(root, exc) from None
        yield
    finally:
        lock.release()
