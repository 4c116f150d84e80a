"""Validation report: quarantined rows grouped by reason (check x column), each with file and line."""

from __future__ import annotations

import polars as pl

from perfledger.reports.page import Page, Section, Table

ROW_LIMIT = 500  # rows listed per page; the counts above always cover every row


def reasons(quarantine: pl.DataFrame) -> pl.DataFrame:
    """Rows and files per (table, check, column), most frequent first."""
    if not quarantine.height:
        return pl.DataFrame(schema={"table": pl.String, "check": pl.String, "column": pl.String, "rows": pl.UInt32,
                                    "files": pl.UInt32})
    return (quarantine.group_by("table", "check", "column")
            .agg(rows=pl.len(), files=pl.col("source_file").n_unique())
            .sort(["rows", "table", "check", "column"], descending=[True, False, False, False]))


def validation_page(quarantine: pl.DataFrame, failed_batches: list[dict]) -> Page:
    """The page: reason counts, failed batches, then the rows themselves (file, line, value)."""
    by_reason = reasons(quarantine)
    listed = quarantine.sort("table", "source_file", "source_row").head(ROW_LIMIT) if quarantine.height else quarantine
    rows_section = Section("Quarantined rows", table=Table(
        ["table", "system", "backend", "version", "file", "line", "check", "column", "value"],
        [[r["table"], r["system"], r["backend"], r["version"], r["source_file"], r["source_row"], r["check"],
          r["column"], r["value"]] for r in listed.iter_rows(named=True)],
        filterable=True,
        note=f"first {ROW_LIMIT} of {quarantine.height} findings" if quarantine.height > ROW_LIMIT else ""))
    failures = Section("Failed batches (nothing written for them)",
                       text=[] if failed_batches else ["none"],
                       table=Table(["source", "error"], [[f["source"], f["error"]] for f in failed_batches])
                       if failed_batches else None)
    summary = (f"{quarantine.height} findings in {quarantine['source_file'].n_unique() if quarantine.height else 0} files, "
               f"{by_reason.height} distinct reasons; {len(failed_batches)} failed batches in the last run")
    return Page("validation", "Validation report", [
        Section("Quarantined rows by reason", table=Table(list(by_reason.columns), [list(r) for r in by_reason.iter_rows()])),
        failures, rows_section,
    ], summary=summary)
