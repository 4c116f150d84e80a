"""Assemble what a ledger shows (build JSON, report context) from the ledger's frames. Pure."""

from __future__ import annotations

import polars as pl

from perfledger.ledger.cells import mismatches
from perfledger.ledger.specs import ModelSpec

STATUSES = ("done", "partial", "failed", "missing", "unexpected")
CELL_FIELDS = ("lane", "system", "backend", "version", "rows", "kernel_sources", "status", "claim", "dtypes",
               "dtype_rows", "phases", "first_ingest", "last_ingest", "batch_ids", "meta_status",
               "meta_collected_at", "meta_image", "suffix_violations", "failed_cases")
REMOVAL_KINDS = ("prune", "replace", "recollect")


def build_payload(spec: ModelSpec, cells: pl.DataFrame, as_of: str | None) -> dict:
    """The `ledger build --json` document."""
    return {
        "model": spec.model,
        "architecture": spec.architecture,
        "as_of": as_of,
        "cells": [{k: c[k] for k in CELL_FIELDS} for c in cells.iter_rows(named=True)],
        "mismatches": mismatches(cells),
        "by_status": {s: int(cells.filter(pl.col("status") == s).height) for s in STATUSES},
    }


def cell_overview(spec: ModelSpec, cells: pl.DataFrame) -> dict:
    """What a pipeline run keeps of a ledger: each cell's rows and status, and the cells per status present."""
    rows = cells.select("lane", "system", "backend", "version", "rows", "status").sort("lane", "system", "backend", "version")
    return {"model": spec.model, "cells": rows.to_dicts(), "by_status": dict(sorted(cells.group_by("status").len().iter_rows()))}


def lane_summary(spec: ModelSpec, cells: pl.DataFrame) -> list[dict]:
    """Per lane: title, table, cells by status, total rows, systems done, backend/versions."""
    out = []
    for lane in spec.lanes:
        mine = cells.filter(pl.col("lane") == lane.lane_id)
        done = mine.filter(pl.col("status") == "done")
        out.append({
            "lane": lane.lane_id, "title": lane.title, "table": lane.table,
            "by_status": {s: int(mine.filter(pl.col("status") == s).height) for s in STATUSES},
            "rows": int(mine["rows"].sum()),
            "systems_done": sorted(set(done["system"].to_list())),
            "cells": [f"{b} {v}" for b, v in mine.select("backend", "version").unique().sort(["backend", "version"]).iter_rows()],
        })
    return out


GROUP_FIELDS = ("lane", "backend", "version", "date", "date_source", "rows", "kernel_sources", "dtypes", "dtype_rows",
                "phases",
                "status", "claim", "meta_status", "suffix_violations")


def cell_date(cell: dict) -> str:
    """collection_meta's collected_at when known, else the last ingest (YYYY-MM-DD)."""
    return str(cell.get("meta_collected_at") or cell.get("last_ingest") or "")[:10]


def cell_date_source(cell: dict) -> str:
    """Where cell_date came from, so a reader never takes an ingest day for a collection day."""
    return "collected" if cell.get("meta_collected_at") else "ingested" if cell.get("last_ingest") else ""


def inventory(cells: pl.DataFrame) -> list[dict]:
    """Inventory rows: cells of a lane and backend/version whose every shown value is identical are one
    row with their systems joined ("gb200 / gb300"), in first-seen order."""
    groups: dict[tuple, dict] = {}
    for c in cells.iter_rows(named=True):
        row = {**c, "date": cell_date(c), "date_source": cell_date_source(c)}
        key = tuple(tuple(v) if isinstance(v, list) else v for v in (row[f] for f in GROUP_FIELDS))
        if key in groups:
            groups[key]["system"] += f" / {c['system']}"
        else:
            groups[key] = row
    return list(groups.values())


def removals(events: pl.DataFrame) -> list[dict]:
    """Events that took rows away from a cell (prunes, wholesale replacements that shrank it)."""
    if not events.height:
        return []
    lost = events.filter(pl.col("kind").is_in(REMOVAL_KINDS) & (pl.col("rows_after") < pl.col("rows_before")))
    return lost.with_columns(removed=pl.col("rows_before") - pl.col("rows_after")).to_dicts()


def report_context(spec: ModelSpec, cells: pl.DataFrame, events: pl.DataFrame, decisions: list[dict],
                   matrix: dict | None, as_of: str | None, generated_at: str, ours: dict | None = None) -> dict:
    """Everything the Markdown/HTML templates render; all numbers come from the frames passed in."""
    return {
        "model": spec.model, "architecture": spec.architecture, "title": spec.title, "systems": list(spec.systems),
        "as_of": as_of, "generated_at": generated_at,
        "lanes": lane_summary(spec, cells),
        "cells": [{k: c[k] for k in CELL_FIELDS} for c in cells.iter_rows(named=True)],
        "inventory": inventory(cells),
        "totals": {"cells": cells.height, "rows": int(cells["rows"].sum()) if cells.height else 0,
                   "failed_cases": int(cells["failed_cases"].fill_null(0).sum()) if cells.height else 0,
                   **{s: int(cells.filter(pl.col("status") == s).height) for s in STATUSES}},
        "mismatches": mismatches(cells),
        "events": events.sort("at").to_dicts() if events.height else [],
        "removals": removals(events),
        "decisions": decisions,
        "findings": list(spec.findings), "invariants": list(spec.invariants),
        "matrix": matrix,
        "ours": ours,
    }
