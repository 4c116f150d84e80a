"""A source file's layout, recorded at ingest so an export can write the file back as it came.

Normalisation changes what a file looked like (columns by name in catalog order, framework labels
normalised, `version` kept as `row_version`, one string type, reserved names moved to `<name>_in_file`,
the custom_allreduce `backend` renamed). The layout keeps what that loses: the column order, the Arrow
schema with its metadata (string vs large_string, pandas metadata), the Parquet codec, and the framework
label of every row (as runs over source rows). `restore` turns curated + repeated rows back into the
file's table; rows quarantined at ingest are not curated data and are not restored.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from perfledger.schemas.catalog import TableSpec
from perfledger.warehouse.readers import ROW_INDEX, RawFile

LAYOUT_TABLE = "file_layouts"
LAYOUT_SCHEMA = {"table": pl.String, "system": pl.String, "backend": pl.String, "version": pl.String,
                 "batch_id": pl.String, "source_file": pl.String, "kind": pl.String, "columns": pl.String,
                 "arrow_schema": pl.String, "compression": pl.String, "framework_labels": pl.String,
                 "rows_in": pl.Int64}


def _label_runs(raw: RawFile) -> list[list]:
    """[[first source row, label], ...]: the framework label as written, one entry where it changes."""
    if "framework" not in raw.frame.columns or raw.frame.is_empty():
        return []
    frame = raw.frame.select(pl.col(ROW_INDEX), pl.col("framework").cast(pl.String))
    changes = frame.filter(pl.col("framework").ne_missing(pl.col("framework").shift(1)) | (pl.int_range(pl.len()) == 0))
    return [list(row) for row in changes.iter_rows()]


def record_layout(path: Path, raw: RawFile, data: bytes | None = None) -> dict:
    """The layout of one source file (Parquet: its Arrow schema and codec from the footer of `path`, or
    of `data`, the file's bytes when already read)."""
    schema = codec = None
    if raw.kind == "parquet":
        parquet = pq.ParquetFile(path if data is None else pa.BufferReader(data))
        schema = base64.b64encode(parquet.schema_arrow.serialize().to_pybytes()).decode()
        metadata = parquet.metadata
        if metadata.num_row_groups and metadata.num_columns:
            codec = metadata.row_group(0).column(0).compression
    return {"kind": raw.kind, "columns": json.dumps([c for c in raw.frame.columns if c != ROW_INDEX]),
            "arrow_schema": schema, "compression": codec, "framework_labels": json.dumps(_label_runs(raw)),
            "rows_in": raw.frame.height + len(raw.rejects)}


def arrow_schema(layout: dict) -> pa.Schema | None:
    text = layout.get("arrow_schema")
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text))) if text else None


def _labels(layout: dict, source_rows: pl.Series) -> pl.Series:
    """The framework label as written for each source row (from the recorded runs)."""
    runs = json.loads(layout.get("framework_labels") or "[]")
    if not runs:
        return pl.Series("framework", [None] * len(source_rows), dtype=pl.String)
    starts = pl.Series([r[0] for r in runs], dtype=pl.Int64)
    labels = pl.Series([r[1] for r in runs], dtype=pl.String)
    return labels.gather(starts.search_sorted(source_rows, side="right") - 1).alias("framework")


def _curated_name(column: str, spec: TableSpec, present: set[str], renamed_suffix: str) -> str | None:
    """The curated column holding a file column (catalog renames and reserved-name moves undone)."""
    if column == "version":
        return "row_version"
    for candidate in (column + renamed_suffix, spec.renames.get(column), column):
        if candidate in present:
            return candidate
    return None


def restore(rows: pl.DataFrame, layout: dict, spec: TableSpec, renamed_suffix: str) -> pa.Table:
    """Curated + repeated rows of one file (any order) as the file's own table: rows in source order,
    its columns in its order with its labels and Arrow types."""
    columns = json.loads(layout["columns"])
    rows = rows.sort("source_row")
    present = set(rows.columns)
    sources = {c: _curated_name(c, spec, present, renamed_suffix) for c in columns}
    labels = _labels(layout, rows["source_row"])
    rows = rows.select([labels if c == "framework" else (pl.col(sources[c]) if sources[c] else pl.lit(None, pl.String))
                        .alias(c) for c in columns])
    table = rows.to_arrow()
    schema = arrow_schema(layout)
    if schema is None:
        return table
    return pa.Table.from_arrays([table.column(f.name).cast(f.type) for f in schema], schema=schema)
