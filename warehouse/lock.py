"""The run lock: one writer per warehouse at a time; a second one waits briefly, then says "busy".

Taking the lock also finishes what a crashed writer left: its open commit unit is rolled back
(warehouse.journal) before the new holder writes anything.

On local disk the lock is an OS file lock (released by the kernel when the holder dies). On object
storage, where no OS lock reaches other machines, it is a lease object created with a conditional put
(If-None-Match, the primitive deltalake commits with): exactly one creator wins, the holder renews it
while it runs, and a lease whose holder is gone (same host and a dead process, or not renewed for
LEASE_S on any host) is taken over by compare-and-swap on its ETag, so two takers cannot both win.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from filelock import FileLock, Timeout

from perfledger.settings import Location, ObjectLocation
from perfledger.warehouse import objects
from perfledger.warehouse.errors import WarehouseBusy, WarehouseUnwritable
from perfledger.warehouse.journal import recover

LOCK_NAME = ".perfledger.lock"
LEASE_S = 30.0  # an object-store lease not renewed for this long is abandoned (its holder renews every third)


def _unwritable(root: Location, exc: OSError, detail: str = "") -> WarehouseUnwritable:
    return WarehouseUnwritable(f"cannot write warehouse {root}: {exc.strerror or exc}{detail}")


def check_writable(root: Location) -> None:
    """Raise WarehouseUnwritable now when `root` could not take the run lock, so a long job that will
    write fails before its first stage rather than at its first write."""
    if isinstance(root, ObjectLocation):
        probe = root / ".perfledger.writable"
        try:
            objects.write(probe, b"")
            objects.delete([probe])
        except OSError as exc:
            raise _unwritable(root, exc, " (cannot take its run lock)") from None
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
        os.close(os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644))
    except OSError as exc:
        raise _unwritable(root, exc, " (cannot take its run lock)") from None


def _busy(root: Location, who: str) -> WarehouseBusy:
    return WarehouseBusy(f"warehouse {root} is busy: another run holds its lock ({who}); try again later")


def _holder(purpose: str) -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "purpose": purpose,
            "since": datetime.now(UTC).isoformat(timespec="seconds")}


@contextmanager
def run_lock(root: Location, *, timeout_s: float = 5.0, purpose: str = "write") -> Iterator[None]:
    """Hold the warehouse's exclusive run lock (an OS lock: released even when the holder is killed; a
    renewed lease object on object storage)."""
    if isinstance(root, ObjectLocation):
        with _lease(root, timeout_s, purpose):
            yield
        return
    lock = FileLock(str(root / LOCK_NAME))
    holder = root / ".perfledger.lock.holder"
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock.acquire(timeout=timeout_s)
    except Timeout:
        who = holder.read_text() if holder.exists() else "unknown process"
        raise _busy(root, who) from None
    except OSError as exc:
        raise _unwritable(root, exc, " (cannot take its run lock)") from None
    try:
        try:
            holder.write_text(json.dumps(_holder(purpose)))
            recover(root)
        except OSError as exc:
            raise _unwritable(root, exc) from None
        yield
    finally:
        lock.release()


def _abandoned(lease: dict) -> bool:
    """A lease whose holder cannot be running: a dead process on this host, or no renewal for LEASE_S."""
    if lease.get("host") == socket.gethostname() and isinstance(lease.get("pid"), int):
        try:
            os.kill(lease["pid"], 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
    return float(lease.get("expires", 0)) < time.time()


class _Lease:
    """The held lease: renewed by compare-and-swap in a background thread until released."""

    def __init__(self, key: ObjectLocation, body: dict, e_tag: str | None):
        self.key, self.body, self.e_tag = key, body, e_tag
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._renew, name="lease", daemon=True)

    def _renew(self) -> None:
        while not self.stop.wait(LEASE_S / 3):
            body = json.dumps({**self.body, "expires": time.time() + LEASE_S}).encode()
            try:
                if not objects.replace(self.key, body, self.e_tag):
                    return  # taken over (we stalled past the lease): nothing of ours to renew
                self.e_tag = (objects.read(self.key) or (b"", None))[1]
            except OSError:
                continue  # the store is unreachable for now: try again at the next beat

    def release(self) -> None:
        self.stop.set()
        self.thread.join()
        found = objects.read(self.key)
        if found is not None and json.loads(found[0]).get("token") == self.body["token"]:
            objects.delete([self.key])


def _take(key: ObjectLocation, body: dict) -> _Lease | None:
    """One attempt: create the lease, or take over an abandoned one; None while another holder lives."""
    data = json.dumps({**body, "expires": time.time() + LEASE_S}).encode()
    if objects.create(key, data):
        return _Lease(key, body, (objects.read(key) or (b"", None))[1])
    found = objects.read(key)
    if found is None:
        return None  # released meanwhile: the next attempt creates it
    try:
        current = json.loads(found[0])
    except json.JSONDecodeError:
        current = {}
    if _abandoned(current) and found[1] is not None and objects.replace(key, data, found[1]):
        return _Lease(key, body, (objects.read(key) or (b"", None))[1])
    return None


@contextmanager
def _lease(root: ObjectLocation, timeout_s: float, purpose: str) -> Iterator[None]:
    key = root / LOCK_NAME
    body = {**_holder(purpose), "token": uuid.uuid4().hex}
    deadline = time.monotonic() + timeout_s
    try:
        while (held := _take(key, body)) is None:
            if time.monotonic() >= deadline:
                found = objects.read(key)
                who = json.loads(found[0]) if found else {}
                raise _busy(root, json.dumps({k: who.get(k) for k in ("pid", "host", "purpose", "since")}))
            time.sleep(0.2)
    except OSError as exc:
        raise _unwritable(root, exc, " (cannot take its run lock)") from None
    held.thread.start()
    try:
        try:
            recover(root)
        except OSError as exc:
            raise _unwritable(root, exc) from None
        yield
    finally:
        held.release()
