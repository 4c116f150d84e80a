"""History on the index: trends across warehouse table versions, so the index shows more than the last run.

Delta time travel over the tables the pipeline writes: `batches` (rows accepted per ingest commit),
`ledger_cells` (rows per lane), `support_matrix` (status counts per label) and `estimates` (the scenario
estimates of each pricing). Each reads at most HISTORY_VERSIONS versions, newest first; nothing is derived
beyond counting and a median.
"""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from perfledger.reports.page import Section, Table

HISTORY_VERSIONS = 12


def _versions(wh, table: str) -> list[tuple[int, str]]:
    """(version, commit time) of the newest HISTORY_VERSIONS commits of an auxiliary table, newest first."""
    out = []
    for h in wh.table_history(table)[:HISTORY_VERSIONS]:
        stamp = h.get("timestamp")
        when = datetime.fromtimestamp(stamp / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S") if stamp else ""
        out.append((int(h["version"]), when))
    return sorted(out, reverse=True)


def _pivot(records: list[dict], series: str, value: str, versions: list[tuple[int, str]], by_series: bool = False) -> Table:
    """Versions as rows (newest first), one column per series; `by_series`: one row per series, one column per
    version (for many long series names). Blank where a version lacks the series."""
    names = sorted({r[series] for r in records})
    cells = {(r["version"], r[series]): r[value] for r in records}
    if by_series:
        return Table(["series", *(f"v{v} ({when})" for v, when in versions)],
                     [[n, *(cells.get((v, n)) for v, _ in versions)] for n in names])
    return Table(["version", "committed", *names],
                 [[v, when, *(cells.get((v, n)) for n in names)] for v, when in versions])


def lane_rows(wh, hf_ids: list[str]) -> list[dict]:
    if not wh.has_table("ledger_cells"):
        return []
    out = []
    for version, _ in _versions(wh, "ledger_cells"):
        cells = wh.read_table("ledger_cells", as_of=version, columns=["model", "lane", "rows"])
        cells = cells.filter(pl.col("model").is_in(hf_ids)) if hf_ids else cells
        for lane, rows in cells.group_by("lane").agg(pl.col("rows").sum()).iter_rows():
            out.append({"version": version, "lane": lane, "rows": int(rows)})
    return out


def matrix_counts(wh, hf_ids: list[str]) -> list[dict]:
    if not wh.has_table("support_matrix"):
        return []
    out = []
    for version, _ in _versions(wh, "support_matrix"):
        frame = wh.read_table("support_matrix", as_of=version, columns=["HuggingFaceID", "label", "Status"])
        frame = frame.filter(pl.col("HuggingFaceID").is_in(hf_ids)) if hf_ids else frame
        for label, status, n in frame.group_by("label", "Status").len().iter_rows():
            out.append({"version": version, "series": f"{label}: {status}", "rows": int(n)})
    return out


def estimate_medians(wh) -> list[dict]:
    if not wh.has_table("estimates"):
        return []
    out = []
    for version, _ in _versions(wh, "estimates"):
        frame = wh.read_table("estimates", as_of=version).filter(pl.col("kind") == "scenario")
        if "parallelism" not in frame.columns:  # priced before scenarios named their parallelism and fit
            frame = frame.with_columns(parallelism=pl.lit(None, pl.String), fit=pl.lit(None, pl.String))
        frame = frame.filter(pl.col("fit").fill_null("unknown") != "does not fit")
        grouped = frame.group_by("model", "scenario", "parallelism", "metric").agg(
            priced=pl.col("ms").is_not_null().sum(), median=pl.col("ms").median())
        for model, scenario, par, metric, priced, median in grouped.iter_rows():
            name = f"{model} {scenario}" + (f" [{par}]" if par else "") + f" {metric}"
            out.append({"version": version, "series": name, "value": f"{median:,.4g} ms ({priced})" if median else "—"})
    return out


def ingest_totals(wh) -> list[dict]:
    if not wh.has_table("batches"):
        return []
    out = []
    for version, _ in _versions(wh, "batches"):
        frame = wh.read_table("batches", as_of=version, columns=["batch_id", "rows_accepted", "rows_duplicate"])
        out += [{"version": version, "series": "batches", "value": frame.height},
                {"version": version, "series": "rows accepted", "value": int(frame["rows_accepted"].sum() or 0)},
                {"version": version, "series": "repeated keys", "value": int(frame["rows_duplicate"].sum() or 0)}]
    return out


def history_sections(wh, hf_ids: list[str]) -> list[Section]:
    """The index's History sections (one per table that has versions)."""
    sections = []
    for title, table, records, series, value, text, by_series in [
        ("History: warehouse contents", "batches", ingest_totals(wh), "series", "value",
         "Totals held after each ingest commit (a no-op run adds no version).", False),
        ("History: rows per lane", "ledger_cells", lane_rows(wh, hf_ids), "lane", "rows",
         "Ledger rows per lane (every system, backend and version) at each ledger build.", False),
        ("History: support-matrix statuses", "support_matrix", matrix_counts(wh, hf_ids), "series", "rows",
         "Rows per label and status for the configured models at each matrix import or build.", False),
        ("History: scenario estimates", "estimates", estimate_medians(wh), "series", "value",
         "Median estimate over the priced systems where the deployment fits in GPU memory (and how many), at each "
         "pricing, newest first; versions before fit was recorded count every priced system.", True),
    ]:
        if records:
            sections.append(Section(title, text=[text], table=_pivot(records, series, value, _versions(wh, table), by_series)))
    return sections
