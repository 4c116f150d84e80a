"""The flow that prefect.yaml's deployments schedule: a pipeline run from a config path (+ a backfill).

Deployment parameters must be plain values, so this entry point takes a config path and options and
runs the same pipeline as `perfledger run`.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow


@flow(name="perfledger-scheduled")
def scheduled_run(config: str | None = None, sources: list[str] | None = None, stages: list[str] | None = None,
                  backfill_days: int | None = None) -> dict:
    """Load the config (default: the embedded one), optionally narrow sources/stages, and run it.

    `backfill_days` re-derives the last N days' batches instead of ingesting.
    """
    from dataclasses import replace
    from datetime import date, timedelta

    from perfledger.flows.config import load_pipeline_config
    from perfledger.flows.pipeline import run_pipeline

    cfg = load_pipeline_config(Path(config) if config else None)
    if sources:
        cfg = replace(cfg, sources=[s if s == "aic-package" else str(Path(s).resolve()) for s in sources])
    if stages:
        cfg = replace(cfg, stages=list(stages))
    window = None
    if backfill_days is not None:
        window = {"since": str(date.today() - timedelta(days=backfill_days)), "until": None, "systems": []}
    return run_pipeline(cfg, backfill=window)
