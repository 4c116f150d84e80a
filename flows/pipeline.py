"""`perfledger run`: ingest → validate → ledger → matrix → estimate → plan → generate → publish, one Prefect flow.

Each stage is a task over plain functions (flows.tasks), run after the previous stage's task (real edges
in Prefect's task graph). Derived stages are keyed by content (their inputs' file hashes, the warehouse
table versions they read, their parameters): an unchanged input returns the stored result instead of
recomputing, shown as a Completed "skipped: inputs unchanged" task. Independent work (ingest partitions, one ledger per
model, one deployment per YAML) is submitted to the flow's task runner, so `--runner dask` spreads it.
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger

from perfledger.estimator.plans import PLANS_TABLE
from perfledger.estimator.scenarios import ESTIMATES_TABLE
from perfledger.flows.config import PipelineConfig
from perfledger.flows.ingest import ingest_task
from perfledger.flows.keys import StageCache, content_key, file_digest, warehouse_state
from perfledger.flows.tasks import (
    estimate_task,
    generate_task,
    ledger_task,
    matrix_dir,
    matrix_task,
    plan_task,
    publish_task,
    skipped_task,
    validate_task,
)
from perfledger.safe_io import check_output_folder
from perfledger.warehouse.inventory import curated_inventory, table_totals
from perfledger.warehouse.lock import WarehouseBusy, check_writable, run_lock
from perfledger.warehouse.store import Warehouse

PUBLISH_READS = ("batches", "ledger_events", "ledger_decisions", "support_matrix", ESTIMATES_TABLE, PLANS_TABLE)
WAREHOUSE_WRITERS = ("ingest", "ledger", "matrix", "estimate", "plan")  # stages that write the warehouse


class PipelineBusy(RuntimeError):
    """Another `perfledger run` holds this output folder."""


class _Stages:
    """Runs stages through the content-key cache and records status and timing of each.

    Every stage's task runs after the previous stage's (`wait_for`: real edges in Prefect's task graph,
    ingest → validate → ledger → matrix → estimate → plan → generate → publish); a stage whose key matched runs
    as a Completed "skipped: inputs unchanged" task, so the graph shows it too.
    """

    def __init__(self, cfg: PipelineConfig):
        self.cfg, self.cache, self.log = cfg, StageCache(cfg.out), get_run_logger()
        self.wh = Warehouse(cfg.warehouse)
        self.records: list[dict] = []
        self.upstream: list = []   # the previous stage's task states/futures
        self._current: list = []

    def wanted(self, stage: str) -> bool:
        return stage in self.cfg.stages

    def call(self, task, *args):
        """Run one task in this process after the previous stage; its result."""
        state = task(*args, return_state=True, wait_for=self.upstream)
        self._current.append(state)
        return state.result()

    def fan_out(self, task, argsets: list[tuple]) -> list:
        """Submit one task per argument set to the task runner after the previous stage; their results."""
        futures = [task.submit(*args, wait_for=self.upstream) for args in argsets]
        self._current.extend(futures)
        return [f.result() for f in futures]

    def run(self, stage: str, reads: tuple[str, ...], parts: list, compute, valid=lambda result: True):
        """Run `compute` unless the key over (warehouse, versions of the tables it `reads`, parts) is unchanged."""
        started = time.perf_counter()
        key = content_key(stage, str(self.cfg.warehouse), warehouse_state(self.wh, reads), *parts)
        entry = self.cache.state.get(stage)
        if entry and entry.get("key") == key and not valid(entry["result"]):
            self.cache.state.pop(stage)  # outputs gone: recompute
        result, skipped = self.cache.run(stage, key, compute)
        if skipped:
            self.call(skipped_task.with_options(name=stage), stage)
        self.record(stage, "skipped" if skipped else "ran", started)
        return result

    def record(self, stage: str, status: str, started: float) -> None:
        entry = {"stage": stage, "status": status, "seconds": round(time.perf_counter() - started, 3)}
        self.records.append(entry)
        self.log.info("stage %s", json.dumps(entry))
        if self._current:
            self.upstream, self._current = self._current, []


def _ledgers(st: _Stages, root: str) -> list[dict]:
    from perfledger.ledger.specs import find_spec

    specs = [file_digest(find_spec(m).path) for m in st.cfg.models]
    return st.run("ledger", ("batches",), [st.cfg.models, specs],
                  lambda: st.fan_out(ledger_task, [(root, model) for model in st.cfg.models]))


def _deployments(st: _Stages, root: str, out: str) -> list[dict]:
    """Keyed on the backend versions the warehouse holds too: they pick a YAML's default release."""
    from perfledger.generator.api import held_versions

    def present(result):
        return all((Path(out) / d["folder"] / f).is_file() for d in result for f in d["files"])

    held = held_versions(root)
    return st.run("generate", (), [[(d, file_digest(d)) for d in st.cfg.deployments], held],
                  lambda: st.fan_out(generate_task, [(d, out, held) for d in st.cfg.deployments]), present)


def _plans(st: _Stages, root: str, out: str) -> dict:
    """Keyed on the questions, the gate and the backend versions held (they pick the rendered release); the stored
    result stands while every rendered file is still there."""
    from perfledger.generator.api import held_versions

    def present(result):
        return all((Path(out) / q["folder"] / f).is_file() for q in result["questions"] for f in q["files"])

    held = held_versions(root)
    return st.run("plan", ("batches",), [st.cfg.plans, st.cfg.gate, held],
                  lambda: st.call(plan_task, root, out, st.cfg.plans, st.cfg.gate, held), present)


def gate_status(*reports: dict | None) -> str | None:
    """The run's gate over the estimates' and the plans' gates: fail if either fails, else the first one's status."""
    statuses = [r["gate"]["status"] for r in reports if r]
    return "fail" if "fail" in statuses else next(iter(statuses), None)


@flow(name="perfledger-run")
def pipeline_flow(params: dict, partitioned: bool = False, backfill: dict | None = None) -> dict:
    cfg = PipelineConfig.from_params(params)
    started = time.perf_counter()
    root, out = str(cfg.warehouse), str(cfg.out)
    st = _Stages(cfg)
    report = {"batches": 0, "new_batches": 0, "rows_accepted": 0, "rows_quarantined": 0, "rows_duplicate": 0,
              "failed_batches": [], "tables": {}}
    t = time.perf_counter()
    if backfill is not None:
        from perfledger.ledger.backfill import rederive

        report = {**report, "backfill": rederive(st.wh, backfill)}
        st.record("backfill", "ran", t)
    elif st.wanted("ingest"):
        report = st.call(ingest_task, cfg.sources, root, partitioned)  # commits stay in this process
        st.record("ingest", "ran", t)
    validation = st.run("validate", ("batches",), [], lambda: st.call(validate_task, root)) if st.wanted("validate") else None
    ledgers = _ledgers(st, root) if st.wanted("ledger") else []
    if st.wanted("matrix") and (cfg.matrices or cfg.build_matrix):
        build = cfg.models if cfg.build_matrix else []
        st.run("matrix", ("batches",) if build else (), [[(m, file_digest(matrix_dir(m["path"]))) for m in cfg.matrices],
                                                         build], lambda: st.call(matrix_task, root, cfg.matrices, build))
    estimates = None
    if st.wanted("estimate"):
        estimates = st.run("estimate", ("batches",), [file_digest(cfg.scenarios), cfg.models, cfg.gate],
                           lambda: st.call(estimate_task, root, str(cfg.scenarios), cfg.models, cfg.gate))
    plans = _plans(st, root, out) if st.wanted("plan") and cfg.plans else None
    deployments = _deployments(st, root, out) if st.wanted("generate") else []
    entries = curated_inventory(st.wh)
    tables = table_totals(entries)
    run = {
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"), "seconds": time.perf_counter() - started,
        "warehouse": root, "sources": cfg.sources, "ingest": report, "tables": tables,
        "inventory_tables": len(tables), "inventory_slices": len(entries),
        "inventory_rows": sum(t["rows"] for t in tables), "ledgers": ledgers, "deployments": deployments,
        "validation": validation, "stages": st.records,
        "plans": [{k: q[k] for k in ("label", "folder", "files")} for q in (plans or {}).get("questions", [])],
    }
    site = {}
    if st.wanted("publish"):
        site = st.run("publish", PUBLISH_READS, [ledgers, deployments, validation, cfg.models],
                      lambda: st.call(publish_task, root, out, cfg.models, run, cfg.allow_symlinked_out),
                      lambda result: Path(result["index"]).is_file())
    run["seconds"] = time.perf_counter() - started
    return {"summary": site.get("summary"), "site": site.get("index"), "ingest": report, "stages": st.records,
            "seconds": round(run["seconds"], 3), "gate": gate_status(estimates, plans),
            "plan_gate": (plans or {}).get("gate", {}).get("status"),
            "ledgers": [{"model": ledger["model"], "by_status": ledger["by_status"]} for ledger in ledgers]}


def task_runner(runner: str, address: str | None):
    """None for the default (threads in this process); a DaskTaskRunner for `--runner dask`."""
    if runner == "local":
        return None
    if runner != "dask":
        raise ValueError(f"--runner {runner!r}: expected local or dask")
    from prefect_dask import DaskTaskRunner

    if address:
        return DaskTaskRunner(address=address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": 2, "threads_per_worker": 1, "processes": True,
                                          "dashboard_address": None})


def run_pipeline(config: PipelineConfig, *, runner: str = "local", address: str | None = None,
                 backfill: dict | None = None, wait_s: float = 5.0) -> dict:
    """Run the main job as a Prefect flow; one run per output folder at a time (else PipelineBusy).
    A warehouse the run would write but cannot (read-only, not a folder), or an output folder that is a
    symlink into another tree without `allow_symlinked_out`, fails it before the first stage."""
    check_output_folder(config.out, allow_symlink=config.allow_symlinked_out)
    chosen = task_runner(runner, address)
    flow_fn = pipeline_flow.with_options(task_runner=chosen) if chosen else pipeline_flow
    guard = Path(config.out) / ".pipeline"
    with ExitStack() as stack:
        try:
            stack.enter_context(run_lock(guard, timeout_s=wait_s, purpose="perfledger run"))
        except WarehouseBusy:
            holder = guard / ".perfledger.lock.holder"
            who = holder.read_text() if holder.exists() else "unknown process"
            raise PipelineBusy(f"output folder {config.out} is busy: another perfledger run holds it ({who}); "
                               "try again later") from None
        if backfill is not None or set(WAREHOUSE_WRITERS) & set(config.stages):
            check_writable(config.warehouse)
        return flow_fn(config.to_params(), partitioned=runner == "dask", backfill=backfill)
