"""Mode 2: collect several ops in sequence, each op's cases spread over the device pool, with resume,
failure records, checkpoints, batch.yaml and collection_meta.yaml in the output folder."""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

from perfledger.collector import meta
from perfledger.collector.backends import Backend, get_backend
from perfledger.collector.case_grid import CaseGrid, Task, load_grid, plan_hash, select_tasks
from perfledger.collector.checkpoint import open_checkpoint
from perfledger.collector.execute import JobSpec, Outcome, execute_task
from perfledger.collector.failures import errors_path, make_record, read_errors, write_errors
from perfledger.collector.pool import run_pool
from perfledger.collector.registry import OpEntry, gate_reason, load_registry
from perfledger.collector.staging import count_rows


class CollectError(RuntimeError):
    """The run cannot start (unknown op, missing system, folder owned by another batch, ...)."""


@dataclass
class CollectRequest:
    backend: str
    ops: list[str]
    out: Path
    devices: list[int] | None = None
    resume: bool = False
    retry_failed: bool = False
    limit: int | None = None
    case_filters: tuple[str, ...] = ()
    isolate: bool = False
    system: str | None = None
    image: str | None = None
    timeout_s: float | None = None
    grids: dict[str, Path] = field(default_factory=dict)


@dataclass
class OpPlan:
    entry: OpEntry
    grid: CaseGrid | None
    tasks: list[Task] = field(default_factory=list)
    gated: str | None = None


def build_plan(req: CollectRequest, backend: Backend, sm: int | None) -> list[OpPlan]:
    """Resolve each requested op to its gated, filtered case list (no IO besides reading the YAML)."""
    registry, plans = load_registry(), []
    for op in dict.fromkeys(req.ops):
        entry = registry.get(op)
        reason = gate_reason(entry, backend.name, backend.version(), sm)
        if reason:
            plans.append(OpPlan(entry, None, gated=reason))
            continue
        grid = load_grid(entry.cases, req.grids.get(op))
        tasks = select_tasks(op, grid, dtype_field=entry.dtype_field, dtypes=entry.backends[backend.name].dtypes,
                             dtype_min_sm=registry.dtype_min_sm, sm=sm, case_filters=req.case_filters,
                             limit=req.limit)
        plans.append(OpPlan(entry, grid, tasks))
    return plans


def plan_json(plans: list[OpPlan]) -> dict:
    return {p.entry.op: {"table": p.entry.table, "gated": p.gated, "cases": len(p.tasks),
                         "tasks": [{"task_id": t.task_id, "case": t.params} for t in p.tasks]} for p in plans}


def staged_task_ids(path: Path, op: str, grid: CaseGrid, tasks: list[Task]) -> set[str]:
    """Tasks whose row is already in the staging file (written just before an interruption)."""
    if not path.exists():
        return set()
    cols = [c for c in grid.columns if c != "op_name"]
    with open(path, newline="") as fh:
        have = {(r["op_name"], *(r.get(c) for c in cols)) for r in csv.DictReader(fh)}
    key = lambda t: (str(t.params.get("op_name", op)), *(str(t.params[c]) for c in cols))  # noqa: E731
    return {t.task_id for t in tasks if key(t) in have}


def _run_op(req: CollectRequest, plan: OpPlan, backend: Backend, runtime: dict, devices: list[int]) -> dict:
    entry, out = plan.entry, req.out
    cp = open_checkpoint(out, backend=backend.name, op=entry.op, table=entry.table,
                         framework_version=runtime["version"], sm_version=runtime["sm_version"],
                         resume=req.resume, retry_failed=req.retry_failed)
    staging = out / entry.perf_filename
    if req.resume:
        for tid in staged_task_ids(staging, entry.op, plan.grid, plan.tasks) - cp.done:
            cp.mark(tid, True)
    epath = errors_path(out, backend.name, entry.op)
    errors = {r["task_id"]: r for r in read_errors(epath) if r["task_id"] in cp.failed} if req.resume else {}
    todo = [t for t in plan.tasks if t.task_id not in cp.done | cp.failed]
    write_errors(epath, list(errors.values()))

    def on_outcome(task: Task, device: int, outcome: Outcome) -> None:
        if outcome.ok:
            errors.pop(task.task_id, None)
        else:
            errors[task.task_id] = asdict(make_record(
                backend=backend.name, op=entry.op, table=entry.table, task_id=task.task_id, case=task.params,
                device=device, error_type=outcome.error_type, message=outcome.message, exit_code=outcome.exit_code))
            write_errors(epath, list(errors.values()))
        cp.mark(task.task_id, outcome.ok)

    timeout = req.timeout_s or entry.timeout_s
    isolate = req.isolate or entry.isolation == "subprocess"
    grid_path = req.grids.get(entry.op)
    job = JobSpec(out=str(out), backend=backend.name, op=entry.op, isolate=isolate, timeout_s=timeout,
                  grid_path=str(grid_path.resolve()) if grid_path else None)
    planned_ids = {t.task_id for t in plan.tasks}

    def record_meta(final: bool) -> tuple[int, int, int]:
        """Per-table provenance; before the pool runs it says `partial` with rows unknown (interrupted runs)."""
        done, failed = len(cp.done & planned_ids), len(cp.failed & planned_ids)
        rows = count_rows(staging) if final else None
        meta.update_meta(out, runtime, entry.table, meta.table_entry(
            collector_hash=meta.collector_hash(entry.module, backend.name, entry.cases, grid_path),
            case_plan_hash=plan_hash(cp.done | cp.failed), rows=rows, planned=len(planned_ids),
            done=done, failed=failed, ops=[entry.op], final=final))
        return done, failed, rows

    record_meta(final=False)
    if todo:
        run_pool(todo, devices, partial(execute_task, job), on_outcome,
                 task_timeout_s=timeout + 30 if isolate else timeout, worker_env=backend.worker_env(len(devices)))
    cp.save(force=True)
    write_errors(epath, list(errors.values()))
    done, failed, rows = record_meta(final=True)
    return {"table": entry.table, "planned": len(planned_ids), "ran": len(todo), "done": done, "failed": failed,
            "rows": rows, "classifications": dict(Counter(e["classification"] for e in errors.values()))}


def collect(req: CollectRequest) -> dict:
    """Run the request; returns a JSON-able summary. Raises CollectError before anything runs if it cannot."""
    backend = get_backend(req.backend)
    devices = req.devices if req.devices else backend.device_ids()
    version = backend.version()
    runtime = backend.runtime_info(devices[0] if req.backend != "cpu" else 0)
    if req.image:
        runtime["image"] = req.image
    system = req.system or backend.default_system
    if not system:
        raise CollectError(f"backend {req.backend!r} has no default system: pass --system <name>")
    plans = build_plan(req, backend, runtime["sm_version"])
    req.out.mkdir(parents=True, exist_ok=True)
    meta.write_batch(req.out, system=system, backend=backend.name, version=version)
    summary = {"backend": backend.name, "system": system, "version": version, "out": str(req.out),
               "devices": devices, "ops": {}}
    for plan in plans:
        if plan.gated:
            summary["ops"][plan.entry.op] = {"table": plan.entry.table, "gated": plan.gated}
            continue
        summary["ops"][plan.entry.op] = _run_op(req, plan, backend, runtime, devices)
    return summary
