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


def _per_version(wh, table: str, records_of) -> list[dict]:
    """`records_of(frame)`'s records at each of the table's newest versions, each tagged with its version.

    `records_of` gets a reader `read(columns=None)` of the table at that version; [] without the table.
    """
    if not wh.has_table(table):
        return []
    out = []
    for version, _ in _versions(wh, table):
        def read(columns=None, version=version):
            return wh.read_table(table, as_of=version, columns=columns)
        out += [{"version": version, **record} for record in records_of(read)]
    return out


def _of_models(frame: pl.DataFrame, column: str, hf_ids: list[str]) -> pl.DataFrame:
    return frame.filter(pl.col(column).is_in(hf_ids)) if hf_ids else frame


def lane_rows(wh, hf_ids: list[str]) -> list[dict]:
    def records(read):
        cells = _of_models(read(["model", "lane", "rows"]), "model", hf_ids)
        return [{"lane": lane, "rows": int(rows)}
                for lane, rows in cells.group_by("lane").agg(pl.col("rows").sum()).iter_rows()]
    return _per_version(wh, "ledger_cells", records)


def matrix_counts(wh, hf_ids: list[str]) -> list[dict]:
    def records(read):
        frame = _of_models(read(["HuggingFaceID", "label", "Status"]), "HuggingFaceID", hf_ids)
        return [{"series": f"{label}: {status}", "rows": int(n)}
                for label, status, n in frame.group_by("label", "Status").len().iter_rows()]
    return _per_version(wh, "support_matrix", records)


def estimate_medians(wh) -> list[dict]:
    def records(read):
        frame = read().filter(pl.col("kind") == "scenario")
        if "parallelism" not in frame.columns:  # priced before scenarios named their parallelism and fit
            frame = frame.with_columns(parallelism=pl.lit(None, pl.String), fit=pl.lit(None, pl.String))
        frame = frame.filter(pl.col("fit").fill_null("unknown") != "does not fit")
        grouped = frame.group_by("model", "scenario", "parallelism", "metric").agg(
            priced=pl.col("ms").is_not_null().sum(), median=pl.col("ms").median())
        return [{"series": f"{model} {scenario}" + (f" [{par}]" if par else "") + f" {metric}",
                 "value": f"{median:,.4g} ms ({priced})" if median else "—"}
                for model, scenario, par, metric, priced, median in grouped.iter_rows()]
    return _per_version(wh, "estimates", records)


def ingest_totals(wh) -> list[dict]:
    def records(read):
        frame = read(["batch_id", "rows_accepted", "rows_duplicate"])
        return [{"series": "batches", "value": frame.height},
                {"series": "rows accepted", "value": int(frame["rows_accepted"].sum() or 0)},
                {"series": "repeated keys", "value": int(frame["rows_duplicate"].sum() or 0)}]
    return _per_version(wh, "batches", records)


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
