"""Device pool: one worker process per device, a shared queue held by the parent, dead workers restarted.

The parent owns the queue and hands the next task to whichever worker reports ready (dynamic balancing),
so it always knows each worker's in-flight task: a worker that dies (kill -9, segfault) or overruns the
task timeout has that task recorded as failed, and a fresh worker takes its device slot. Nothing shared
between workers can be left locked by a killed worker (unlike a multiprocessing.Queue read lock).
Workers use the `spawn` start method and pin themselves with CUDA_VISIBLE_DEVICES=<device> before any
CUDA library is imported.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

from perfledger.collector.case_grid import Task
from perfledger.collector.execute import Outcome

MAX_RESTARTS_PER_SLOT = 64


def _worker_main(conn: Connection, device: int, execute: Callable[[Task, int], Outcome], env: dict) -> None:
    os.environ.update(env)
    os.environ["CUDA_VISIBLE_DEVICES"] = str(device)
    try:  # no core dumps from crashing kernels
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass
    conn.send(("ready", None))
    while True:
        task = conn.recv()
        if task is None:
            return
        conn.send(("result", execute(task, device)))


@dataclass
class _Slot:
    device: int
    proc: mp.process.BaseProcess | None = None
    conn: Connection | None = None
    task: Task | None = None
    started: float = 0.0
    restarts: int = 0
    retired: bool = False


def run_pool(
    tasks: list[Task],
    devices: list[int],
    execute: Callable[[Task, int], Outcome],
    on_outcome: Callable[[Task, int, Outcome], None],
    *,
    task_timeout_s: float | None = None,
    worker_env: dict[str, str] | None = None,
) -> None:
    """Run every task on the device pool; `on_outcome(task, device, outcome)` is called once per task.

    `worker_env` is applied in each worker before it imports any kernel library (e.g. BLAS thread caps).
    """
    ctx = mp.get_context("spawn")
    pending = deque(tasks)
    slots = [_Slot(device=d) for d in devices]

    def start(slot: _Slot) -> None:
        parent, child = ctx.Pipe()
        args = (child, slot.device, execute, dict(worker_env or {}))
        slot.proc = ctx.Process(target=_worker_main, args=args, daemon=True)
        slot.proc.start()
        child.close()
        slot.conn, slot.task = parent, None

    def dispatch(slot: _Slot) -> None:
        task = pending.popleft() if pending else None
        try:
            slot.conn.send(task)
        except OSError:  # worker died after saying ready: the task never started, keep it queued
            if task is not None:
                pending.appendleft(task)
            return
        if task is None:
            slot.retired = True
        else:
            slot.task, slot.started = task, time.monotonic()

    def lost(slot: _Slot, error_type: str, message: str, exit_code: int | None) -> None:
        if slot.task is not None:
            task, slot.task = slot.task, None
            on_outcome(task, slot.device, Outcome(task.task_id, False, error_type=error_type,
                                                  message=message, exit_code=exit_code))
        slot.restarts += 1
        if pending and slot.restarts <= MAX_RESTARTS_PER_SLOT:
            start(slot)
        else:
            slot.retired = True

    for slot in slots:
        start(slot)
    try:
        while any(not s.retired for s in slots):
            live = [s for s in slots if not s.retired]
            ready = wait([s.conn for s in live] + [s.proc.sentinel for s in live], timeout=0.2)
            for slot in live:
                if slot.conn in ready or slot.conn.poll():
                    try:
                        kind, payload = slot.conn.recv()
                    except (EOFError, OSError):
                        kind = "eof"
                    if kind == "result":
                        task, slot.task = slot.task, None
                        on_outcome(task, slot.device, payload)
                    if kind in ("ready", "result"):
                        dispatch(slot)
                        continue
                if not slot.proc.is_alive() and not slot.retired:
                    slot.proc.join()
                    code = slot.proc.exitcode
                    kind = "WorkerSignalCrash" if code is not None and code < 0 else "WorkerAbnormalExit"
                    how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"code {code}"
                    lost(slot, kind, f"worker for device {slot.device} died ({how}) while running the task", code)
                elif task_timeout_s and slot.task is not None and time.monotonic() - slot.started > task_timeout_s:
                    slot.proc.kill()
                    slot.proc.join()
                    lost(slot, "TaskTimeout", f"task timed out after {task_timeout_s:g}s on device {slot.device}", None)
        for task in pending:  # every slot exhausted its restarts
            on_outcome(task, -1, Outcome(task.task_id, False, error_type="WorkerOrphanedTask",
                                         message="no live worker left to run the task"))
    finally:
        for slot in slots:
            if slot.proc is not None:
                slot.proc.join(timeout=5)
                if slot.proc.is_alive():
                    slot.proc.kill()
                    slot.proc.join()
