"""`perfledger run`: ingest → ledger → summary, one Prefect flow over the stage functions."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

from prefect import flow, task

from flows.config import PipelineConfig
from flows.ingest import ingest_sources
from warehouse.inventory import curated_inventory
from warehouse.store import Warehouse


@task(name="build-ledger")
def build_ledger(root: str, model: str) -> dict:
    """Derive and store the model's ledger cells; return them for the summary."""
    from ledger.record import record_cells
    from ledger.source import build_cells
    from ledger.specs import find_spec

    warehouse = Warehouse(Path(root))
    spec = find_spec(model)
    cells = build_cells(warehouse, spec)
    record_cells(warehouse, spec.model, cells)
    rows = cells.select("lane", "system", "backend", "version", "rows", "status").sort("lane", "system", "backend", "version")
    by_status = dict(sorted(cells.group_by("status").len().iter_rows()))
    return {"model": spec.model, "cells": rows.to_dicts(), "by_status": by_status}


@task(name="inventory")
def inventory(root: str) -> list[dict]:
    return curated_inventory(Warehouse(Path(root)))


@task(name="write-summary")
def summary(out: str, context: dict) -> str:
    from reports.summary import write_summary

    return str(write_summary(Path(out), context))


def _table_totals(entries: list[dict]) -> list[dict]:
    totals: dict[str, dict] = {}
    for entry in entries:
        row = totals.setdefault(entry["table"], {"table": entry["table"], "slices": 0, "rows": 0})
        row["slices"] += 1
        row["rows"] += entry["rows"]
    return sorted(totals.values(), key=lambda r: r["table"])


@flow(name="perfledger-run")
def pipeline_flow(sources: list[str], models: list[str], warehouse_root: str, out: str) -> dict:
    started = time.perf_counter()
    from ledger.hooks import on_ingest

    report = ingest_sources(sources, warehouse_root, None, None, None, on_ingest)
    entries = inventory(warehouse_root)
    ledgers = [build_ledger(warehouse_root, model) for model in models]
    tables = _table_totals(entries)
    context = {
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "seconds": time.perf_counter() - started,
        "warehouse": warehouse_root, "sources": sources, "ingest": report, "tables": tables,
        "inventory_tables": len(tables), "inventory_slices": len(entries),
        "inventory_rows": sum(t["rows"] for t in tables), "ledgers": ledgers,
    }
    return {"summary": summary(out, context), "ingest": report,
            "ledgers": [{"model": l["model"], "by_status": l["by_status"]} for l in ledgers]}


def run_pipeline(config: PipelineConfig) -> dict:
    """Run the main job as a Prefect flow (a temporary local Prefect server when none is configured)."""
    return pipeline_flow(config.sources, config.models, str(config.warehouse), str(config.out))
