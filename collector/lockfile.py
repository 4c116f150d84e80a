"""Exclusive sibling lock file (`<file>.lock`): O_EXCL create, bounded retry, stale breaking by atomic rename.

Why not flock: staging dirs may sit on NFS, where flock is unreliable. Each holder writes a token
(host, pid, nonce). A lock is stale when its holder is a dead process on this host, or its mtime is older
than `stale_after_s` (other hosts). Breaking first takes a short-lived guard (`<file>.lock.break`, O_EXCL),
re-reads the token, then renames the lock to a unique name: rename is atomic, so exactly one waiter wins,
and the guard closes the check-then-rename window between waiters. The wait (`timeout_s`) is longer than
the stale threshold, so a waiter outlives a dead holder instead of failing its task.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

HOST = socket.gethostname()


class LockTimeout(TimeoutError):
    """The lock could not be acquired within the bounded wait."""


@dataclass
class LockStats:
    waited_s: float = 0.0
    attempts: int = 0
    broke_stale: int = 0


def _token() -> str:
    return f"{HOST} {os.getpid()} {uuid.uuid4().hex}"


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (FileNotFoundError, IsADirectoryError):
        return None


def _pid_dead(token: str) -> bool:
    parts = token.split()
    if len(parts) != 3 or parts[0] != HOST or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _is_stale(path: Path, token: str, stale_after_s: float) -> bool:
    if _pid_dead(token):
        return True
    try:
        return time.time() - path.stat().st_mtime > stale_after_s
    except FileNotFoundError:
        return False


def _create_exclusive(path: Path, token: str) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        os.write(fd, token.encode())
    except OSError:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)
    return True


def _try_break(lock: Path, seen: str, stale_after_s: float) -> bool:
    """Break `lock` if it still holds the stale token `seen`; True only for the one process that broke it."""
    guard = lock.with_name(lock.name + ".break")
    gtoken = _token()
    if not _create_exclusive(guard, gtoken):
        held = _read(guard)
        if held is not None and _is_stale(guard, held, stale_after_s):
            aside = guard.with_name(f"{guard.name}.dead-{uuid.uuid4().hex}")
            try:  # a breaker died holding the guard: move it aside (atomic; one mover wins), then drop it
                os.rename(guard, aside)
                os.unlink(aside)
            except FileNotFoundError:
                pass
        return False
    try:
        if _read(lock) != seen:
            return False
        aside = lock.with_name(f"{lock.name}.breaking-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            os.rename(lock, aside)
        except FileNotFoundError:
            return False
        os.unlink(aside)
        return True
    finally:
        if _read(guard) == gtoken:
            os.unlink(guard)


class FileLock:
    """Context manager holding `<target>.lock` exclusively."""

    def __init__(self, target: Path, *, timeout_s: float = 120.0, stale_after_s: float = 60.0, poll_s: float = 0.02):
        self.path = Path(str(target) + ".lock")
        self.timeout_s, self.stale_after_s, self.poll_s = timeout_s, stale_after_s, poll_s
        self.token = _token()
        self.stats = LockStats()

    def acquire(self) -> None:
        start = time.monotonic()
        while True:
            self.stats.attempts += 1
            if _create_exclusive(self.path, self.token):
                self.stats.waited_s = time.monotonic() - start
                return
            seen = _read(self.path)
            if seen is not None and _is_stale(self.path, seen, self.stale_after_s):
                if _try_break(self.path, seen, self.stale_after_s):
                    self.stats.broke_stale += 1
                    continue
            if time.monotonic() - start > self.timeout_s:
                raise LockTimeout(
                    f"{self.path}: could not acquire within {self.timeout_s:.0f}s "
                    f"({self.stats.attempts} attempts; held by {seen!r})"
                )
            time.sleep(self.poll_s)

    def release(self) -> None:
        if _read(self.path) == self.token:
            os.unlink(self.path)

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
