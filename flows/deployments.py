"""The flow that prefect.yaml's deployments schedule: a pipeline run from a config path (+ a backfill).

Deployment parameters must be plain values, so this entry point takes a config path and options and
runs the same pipeline as `perfledger run`. Warehouse and output folder are parameters too (else the
config's, the environment's, the state folder's). Runs that share an output folder queue on one Prefect
global concurrency slot named after that folder, so overlapping triggers (a nightly run still going when
the weekly one starts, two manual triggers) wait their turn instead of failing "output folder is busy".
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from prefect import flow, get_run_logger

OUT_SLOT_PREFIX = "perfledger-out-"
SLOT_LEASE_S = 3600.0  # renewed while the run holds it


def out_slot(out: Path) -> str:
    """The global concurrency limit name of one output folder (names must be short and plain)."""
    return OUT_SLOT_PREFIX + hashlib.sha256(str(out).encode()).hexdigest()[:16]


def _ensure_slot(name: str) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
            except ObjectAlreadyExists:
                pass  # another run created it in between


@flow(name="perfledger-scheduled")
def scheduled_run(config: str | None = None, sources: list[str] | None = None, stages: list[str] | None = None,
                  backfill_days: int | None = None, landing: str | None = None, warehouse: str | None = None,
                  out: str | None = None) -> dict:
    """Load the config (default: the embedded one), optionally narrow sources/stages, and run it.

    `landing` is a landing folder (created when missing) whose collector output, however deeply nested
    (`landing/<campaign>/<system>/`), is ingested; with nothing landed the ingest is a no-op.
    `backfill_days` re-derives the last N days' batches instead of ingesting.
    """
    from dataclasses import replace
    from datetime import date, timedelta

    from prefect.concurrency.sync import concurrency

    from perfledger.flows.config import load_pipeline_config
    from perfledger.flows.pipeline import run_pipeline
    from perfledger.warehouse.discover import holds_perf_data

    cfg = load_pipeline_config(Path(config) if config else None, warehouse=warehouse, out=Path(out) if out else None)
    if sources is not None:
        cfg = replace(cfg, sources=[s if s == "aic-package" else str(Path(s).resolve()) for s in sources])
    if landing is not None:
        folder = Path(landing).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        landed = holds_perf_data(folder)
        get_run_logger().info("landing %s: %s", folder, "collector output found" if landed else "nothing landed")
        cfg = replace(cfg, sources=[*(cfg.sources if sources is not None else []), *([str(folder)] if landed else [])])
    if stages:
        cfg = replace(cfg, stages=list(stages))
    window = None
    if backfill_days is not None:
        window = {"since": str(date.today() - timedelta(days=backfill_days)), "until": None, "systems": []}
    slot = out_slot(cfg.out)
    _ensure_slot(slot)
    with concurrency(slot, occupy=1, lease_duration=SLOT_LEASE_S, strict=True):
        return run_pipeline(cfg, backfill=window)
