"""Ledger events: what an ingest did to each cell (collect, append, replace, prune, relabel, ...).

An event compares a cell's state before and after a commit; states are rows of the cells frame.
"""

from __future__ import annotations

import polars as pl

from perfledger.ledger.cells import CELL_KEY

EVENTS_SCHEMA = {
    "model": pl.String, "lane": pl.String, "system": pl.String, "backend": pl.String, "version": pl.String,
    "kind": pl.String, "rows_before": pl.Int64, "rows_after": pl.Int64, "kernel_sources_before": pl.List(pl.String),
    "kernel_sources_after": pl.List(pl.String), "batch_ids": pl.List(pl.String), "at": pl.String,
}
STATE = ["rows", "kernel_sources", "batch_ids"]


def classify(rows_before: int, rows_after: int, ks_before: list[str], ks_after: list[str],
             batches_before: list[str], batches_after: list[str]) -> str | None:
    """The event kind for one cell, or None when nothing changed."""
    if rows_before == rows_after and set(ks_before) == set(ks_after) and set(batches_before) == set(batches_after):
        return None
    if rows_before == 0:
        return "collect"
    if rows_after < rows_before:
        return "prune"
    if rows_after == rows_before and set(ks_before) != set(ks_after):
        return "relabel"
    if set(batches_before) and not set(batches_before) & set(batches_after):
        return "recollect" if rows_after == rows_before else "replace"
    if rows_after > rows_before:
        return "append"
    return "ingest"


def derive_events(before: pl.DataFrame, after: pl.DataFrame, batch_ids: list[str], at: str) -> pl.DataFrame:
    """Events for every cell whose rows, kernel sources or batches differ between two cell frames.

    Args:
        before, after: cell frames (ledger/cells.py CELLS_SCHEMA) over the same partitions.
        batch_ids: the batches committed in between; an event names those that now hold rows of the
            cell, or all of them when none does (a prune or a replace that removed the cell's rows).
        at: ISO timestamp of the commit.
    """
    empty = pl.lit([], dtype=pl.List(pl.String))
    b = before.select(CELL_KEY + STATE) if before.height else pl.DataFrame(schema={
        **dict.fromkeys(CELL_KEY, pl.String), "rows": pl.Int64, "kernel_sources": pl.List(pl.String),
        "batch_ids": pl.List(pl.String)})
    joined = b.join(after.select(CELL_KEY + STATE), on=CELL_KEY, how="full", coalesce=True, suffix="_after")
    joined = joined.with_columns(
        pl.col("rows").fill_null(0), pl.col("rows_after").fill_null(0),
        *[pl.col(c).fill_null(empty) for c in ("kernel_sources", "kernel_sources_after", "batch_ids", "batch_ids_after")],
    )
    out = []
    for r in joined.iter_rows(named=True):
        kind = classify(r["rows"], r["rows_after"], r["kernel_sources"], r["kernel_sources_after"],
                        r["batch_ids"], r["batch_ids_after"])
        if kind is None:
            continue
        mine = sorted(set(batch_ids) & set(r["batch_ids_after"])) or sorted(batch_ids)
        out.append({**{k: r[k] for k in CELL_KEY}, "kind": kind, "rows_before": r["rows"],
                    "rows_after": r["rows_after"], "kernel_sources_before": r["kernel_sources"],
                    "kernel_sources_after": r["kernel_sources_after"], "batch_ids": mine, "at": at})
    return pl.DataFrame(out, schema=EVENTS_SCHEMA).sort(CELL_KEY)
