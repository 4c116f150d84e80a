"""Support-matrix page: one tab per system, a row filter, status colours, the replay command per row."""

from __future__ import annotations

import polars as pl

from perfledger.reports.page import Page, Section, Table

SHOWN = ["HuggingFaceID", "Backend", "Version", "Mode", "Status", "Source", "ErrMsg", "Command"]
ERR_CHARS = 240


def short_error(text: str | None) -> str:
    """A traceback's last line (the error itself), cut to ERR_CHARS; the full text stays in the snapshot."""
    lines = [line.strip() for line in str(text or "").replace("\\n", "\n").splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= ERR_CHARS else last[: ERR_CHARS - 1] + "…"


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
        cells = [[short_error(r[c]) if c == "ErrMsg" else r.get(c) for c in SHOWN] for r in part.iter_rows(named=True)]
        tabs.append((system, Table(SHOWN, cells,
                                   row_classes=[f"status-{s}" for s in part["Status"]], filterable=True)))
    stored = Table(["label", "rows", "imported at", "source"],
                   [[snapshot[key] for key in ("label", "rows", "imported_at", "snapshot_source")] for snapshot in labels])
    return Page("matrix", "Support matrix", [
        Section(f"Snapshot {label}", text=[
            f"{rows.height} rows for {', '.join(models) if models else 'every model'} on {len(tabs)} systems. "
            "Each row's Command replays its check."],
            table=Table(["Status", "rows"], [list(r) for r in counts.iter_rows()],
                        row_classes=[f"status-{s}" for s in counts["Status"]])),
        Section("Rows per system", tabs=tabs),
        Section("Stored snapshots", table=stored),
    ], summary=f"snapshot {label}: {rows.height} rows, " + ", ".join(f"{s} {n}" for s, n in counts.iter_rows()))
