"""Support-matrix page: one tab per system, a row filter, status colours, the replay command per row."""

from __future__ import annotations

import polars as pl

from reports.page import Page, Section, Table

SHOWN = ["HuggingFaceID", "Backend", "Version", "Mode", "Status", "Source", "ErrMsg", "Command"]


def matrix_page(label: str | None, frame: pl.DataFrame | None, models: list[str], labels: list[dict]) -> Page:
    """Rows of the configured models (all rows when none is configured) from snapshot `label`."""
    if frame is None or not frame.height:
        return Page("matrix", "Support matrix", [Section("Snapshot", text=[
            "No support-matrix snapshot is stored; add `matrices:` to the pipeline config or run "
            "`perfledger matrix import DIR --label L`."])], summary="no snapshot stored")
    rows = frame.filter(pl.col("HuggingFaceID").is_in(models)) if models else frame
    rows = rows.sort("System", "HuggingFaceID", "Backend", "Version", "Mode")
    counts = rows.group_by("Status").len().sort("Status")
    tabs = []
    for (system,), part in rows.group_by("System", maintain_order=True):
        tabs.append((system, Table(SHOWN, [[r.get(c) for c in SHOWN] for r in part.iter_rows(named=True)],
                                   row_classes=[f"status-{s}" for s in part["Status"]], filterable=True)))
    stored = Table(["label", "rows", "imported at", "source"],
                   [[l["label"], l["rows"], l["imported_at"], l["snapshot_source"]] for l in labels])
    return Page("matrix", "Support matrix", [
        Section(f"Snapshot {label}", text=[
            f"{rows.height} rows for {', '.join(models) if models else 'every model'} on {len(tabs)} systems. "
            "Each row's Command replays its check."],
            table=Table(["Status", "rows"], [list(r) for r in counts.iter_rows()],
                        row_classes=[f"status-{s}" for s in counts["Status"]])),
        Section("Rows per system", tabs=tabs),
        Section("Stored snapshots", table=stored),
    ], summary=f"snapshot {label}: {rows.height} rows, " + ", ".join(f"{s} {n}" for s, n in counts.iter_rows()))
