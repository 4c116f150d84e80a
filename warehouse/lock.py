"""The run lock: one writer per warehouse at a time; a second one waits briefly, then says "busy"."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock, Timeout

LOCK_NAME = ".perfledger.lock"


class WarehouseBusy(RuntimeError):
    """Another process holds the warehouse's run lock."""


@contextmanager
def run_lock(root: Path, *, timeout_s: float = 5.0, purpose: str = "write") -> Iterator[None]:
    """Hold the warehouse's exclusive run lock (an OS lock: released even when the holder is killed)."""
    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(root / LOCK_NAME))
    holder = root / ".perfledger.lock.holder"
    try:
        lock.acquire(timeout=timeout_s)
    except Timeout:
        who = holder.read_text() if holder.exists() else "unknown process"
        raise WarehouseBusy(f"warehouse {root} is busy: another run holds its lock ({who}); try again later") from None
    try:
        holder.write_text(json.dumps({
            "pid": os.getpid(), "host": socket.gethostname(), "purpose": purpose,
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }))
        yield
    finally:
        lock.release()
