"""Run one task on one device: measure in-process (inline ops) or in a fresh child (isolated ops).

Both paths end the same way: the row is appended to the staging file under the lock, or the task fails
with the error text; a task never succeeds without its row on disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from pathlib import Path

from perfledger.collector.backends import Backend, get_backend
from perfledger.collector.case_grid import CaseGrid, Task, load_grid
from perfledger.collector.ops import OpContext, dispatch
from perfledger.collector.registry import OpEntry, load_registry
from perfledger.collector.staging import RowContext, append_rows

TAIL_LINES = 30


@dataclass(frozen=True)
class JobSpec:
    """Everything a pool worker needs to run tasks of one op (picklable for spawn)."""

    out: str
    backend: str
    op: str
    isolate: bool
    timeout_s: float
    grid_path: str | None = None


@dataclass(frozen=True)
class Outcome:
    task_id: str
    ok: bool
    rows: int = 0
    error_type: str = ""
    message: str = ""
    exit_code: int | None = None
    child_env: str | None = None


@cache
def _backend(name: str) -> Backend:
    return get_backend(name)


def measure_and_write(out: Path, entry: OpEntry, grid: CaseGrid, case: dict, backend: Backend, device: int) -> int:
    """Measure one case and append its staging row; returns rows written (1)."""
    module = import_module(entry.module)
    ctx = OpContext(backend=backend, device=device, warmup=grid.warmup, runs=grid.runs)
    kernel_source, latency = dispatch(module.IMPLS, entry.op, case, ctx)
    row = {c: case[c] for c in grid.columns if c != "op_name"} | {"latency": float(latency)}
    context = RowContext(
        framework=backend.framework, version=backend.version(), device=backend.device_name(device),
        op_name=str(case.get("op_name", entry.op)), kernel_source=kernel_source,
    )
    append_rows(Path(out) / entry.perf_filename, context, [row])
    return 1


def log_dir(out: str | Path, backend: str, op: str) -> Path:
    path = Path(out) / "logs" / f"{backend}.{op}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def log_event(job: JobSpec, **event) -> None:
    """One JSON line per task start/end in logs/<backend>.<op>/tasks.jsonl (who ran what, where)."""
    line = json.dumps({"t": time.time(), "pid": os.getpid(), **event}) + "\n"
    fd = os.open(log_dir(job.out, job.backend, job.op) / "tasks.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def execute_task(job: JobSpec, task: Task, device: int) -> Outcome:
    """Pool entry point: run `task` on `device`, catching every failure into the Outcome."""
    log_event(job, event="start", task_id=task.task_id, device=device)
    try:
        outcome = _run_child(job, task, device) if job.isolate else _run_inline(job, task)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a recorded, classified outcome
        tb = traceback.format_exc(limit=8)
        outcome = Outcome(task.task_id, False, error_type=type(exc).__name__, message=f"{exc}\n{tb}")
    log_event(job, event="end", task_id=task.task_id, device=device, ok=outcome.ok, child_env=outcome.child_env)
    return outcome


def _run_inline(job: JobSpec, task: Task) -> Outcome:
    entry = load_registry().get(job.op)
    # the worker pinned itself with CUDA_VISIBLE_DEVICES, so its device is local index 0
    grid = load_grid(entry.cases, Path(job.grid_path) if job.grid_path else None)
    rows = measure_and_write(Path(job.out), entry, grid, task.params, _backend(job.backend), 0)
    return Outcome(task.task_id, True, rows=rows)


def _run_child(job: JobSpec, task: Task, device: int) -> Outcome:
    """Fresh interpreter with CUDA_VISIBLE_DEVICES=<device>: no CUDA/NCCL state leaks between cases."""
    entry = load_registry().get(job.op)
    logs = log_dir(job.out, job.backend, job.op)
    stem = task.task_id.split(":", 1)[1]
    result_path, log_path = logs / f"{stem}.result.json", logs / f"{stem}.log"
    result_path.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", entry.module, "--op", job.op, "--device-backend", job.backend, "--device", "0",
           "--out", job.out, "--case-json", json.dumps(task.params), "--result-json", str(result_path)]
    if job.grid_path:
        cmd += ["--grid", job.grid_path]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(device))
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            code = proc.wait(timeout=job.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            return Outcome(task.task_id, False, error_type="TimeoutExpired",
                           message=f"child timed out after {job.timeout_s:g}s: {_tail(log_path)}", exit_code=None)
    result = json.loads(result_path.read_text()) if result_path.exists() else {}
    if code != 0 or not result.get("ok"):
        error_type = result.get("error_type") or ("ChildCrash" if code and code < 0 else "ChildAbnormalExit")
        if result.get("message"):
            message = result["message"]
        else:
            message = f"child killed by signal {-code}" if code and code < 0 else f"child exited with code {code}"
        return Outcome(task.task_id, False, error_type=error_type, message=f"{message}\n{_tail(log_path)}",
                       exit_code=code, child_env=result.get("cuda_visible_devices"))
    return Outcome(task.task_id, True, rows=int(result["rows"]), exit_code=code,
                   child_env=result.get("cuda_visible_devices"))


def _tail(path: Path) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-TAIL_LINES:])
    except OSError:
        return ""
