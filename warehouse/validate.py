"""Validate a window of prepared batches: one Pandera pass per table over all its files in the window.

Pandera runs each check as its own query, so validating many small files one by one costs more than
reading them; concatenating a table's files first keeps every row checked at a fraction of the cost.
"""

from __future__ import annotations

import polars as pl

from perfledger.schemas.catalog import Catalog
from perfledger.schemas.contracts import validate_rows
from perfledger.warehouse.normalise import TypedFile, finalise
from perfledger.warehouse.prepare import PreparedBatch


def _findings_per_file(files: list[TypedFile]) -> list[pl.DataFrame]:
    spec = files[0].spec
    needed = [c for c in files[0].frame.columns if c in {*spec.keys, *spec.metrics, "op_name", "kernel_source"}]
    combined = pl.concat([f.frame.select(needed) for f in files], how="vertical_relaxed")
    findings = validate_rows(spec, combined)
    out, offset = [], 0
    for file in files:
        height = file.frame.height
        own = findings.filter(pl.col("row_index").is_between(offset, offset + height - 1))
        out.append(own.with_columns(pl.col("row_index") - offset))
        offset += height
    return out


def finalise_window(window: list[PreparedBatch], catalog: Catalog) -> None:
    """Validate every typed file of the window and fill each batch's `tables` with the outcome."""
    by_table: dict[str, list[tuple[PreparedBatch, TypedFile]]] = {}
    for prepared in window:
        for name, typed in prepared.typed.items():
            by_table.setdefault(name, []).append((prepared, typed))
    for name, items in by_table.items():
        for (prepared, typed), findings in zip(items, _findings_per_file([t for _, t in items]), strict=True):
            prepared.tables[name] = finalise(typed, findings, catalog)
        for prepared, _ in items:
            prepared.typed.pop(name, None)
