"""Derive ledger cells: one row per model x lane x system x backend x version, from curated rows.

Pure functions over polars frames; the warehouse read happens in ledger/source.py.
"""

from __future__ import annotations

import polars as pl

from perfledger.ledger.specs import LaneSpec, LaneSpecError, ModelSpec

CELL_KEY = ["model", "lane", "system", "backend", "version"]
PARTITION = ["system", "backend", "version"]
# collection_meta fields plus the collector cases that failed (attempted-and-failed is not never-attempted)
META_COLUMNS = {"meta_status": pl.String, "meta_collected_at": pl.String, "meta_image": pl.String,
                "failed_cases": pl.Int64}
CELLS_SCHEMA = {
    "model": pl.String, "lane": pl.String, "table": pl.String, "system": pl.String, "backend": pl.String,
    "version": pl.String, "rows": pl.Int64, "kernel_sources": pl.List(pl.String), "dtypes": pl.List(pl.String),
    "dtype_rows": pl.List(pl.String), "phases": pl.List(pl.String), "first_ingest": pl.String,
    "last_ingest": pl.String, "batch_ids": pl.List(pl.String), "suffix_violations": pl.Int64, **META_COLUMNS,
    "expected": pl.Boolean, "claim": pl.Int64, "status": pl.String,
}


def lane_filter(spec: ModelSpec, lane: LaneSpec, columns: list[str]) -> pl.Expr:
    """The lane's row filter; a column absent from the data is an error naming the YAML file and key."""
    expr = pl.lit(True)
    for col, want in lane.filter.items():
        if col not in columns:
            raise LaneSpecError(f"{spec.path}: {lane.key}.filter.{col}: column {col!r} not in table {lane.table}")
        expr = expr & (pl.col(col).is_in(want) if isinstance(want, list) else pl.col(col) == want)
    return expr


def expected_cells(spec: ModelSpec, lane: LaneSpec) -> pl.DataFrame:
    rows = [(s, e.backend, e.version) for e in lane.expect for s in e.systems]
    return pl.DataFrame(rows, schema=dict.fromkeys(PARTITION, pl.String), orient="row").unique().with_columns(
        expected=pl.lit(True))


def _dtype_column(lane: LaneSpec, columns: list[str]) -> str | None:
    if lane.dtype_column:
        return lane.dtype_column if lane.dtype_column in columns else None
    return next((c for c in columns if c.endswith("_dtype")), None)


def _suffix_violation(lane: LaneSpec, columns: list[str]) -> pl.Expr:
    rule = lane.suffix_rule
    if rule is None or not rule.kernels:
        return pl.lit(0, dtype=pl.Int64)
    ks = pl.col("kernel_source")
    approximating = pl.any_horizontal([ks.str.contains(k, literal=True) for k in rule.kernels])
    native = pl.lit(False)
    if "row_version" in columns and rule.native_runtimes:
        rv = pl.col("row_version").fill_null("")
        native = pl.any_horizontal([rv.str.starts_with(p) for p in rule.native_runtimes])
    return (approximating & ~ks.str.ends_with(rule.suffix) & ~native).sum().cast(pl.Int64)


def _unique_sorted(col: str | None, columns: list[str]) -> pl.Expr:
    if col is None or col not in columns:
        return pl.lit([], dtype=pl.List(pl.String))
    return pl.col(col).cast(pl.String).drop_nulls().unique().sort().implode()


def _aggregate(spec: ModelSpec, lane: LaneSpec, rows: pl.DataFrame) -> pl.DataFrame:
    cols = rows.columns
    dtype_col = _dtype_column(lane, cols)
    ingested = pl.col("ingested_at").cast(pl.String) if "ingested_at" in cols else pl.lit(None, pl.String)
    agg = rows.group_by(PARTITION).agg(
        rows=pl.len().cast(pl.Int64),
        kernel_sources=_unique_sorted("kernel_source", cols),
        dtypes=_unique_sorted(dtype_col, cols),
        phases=_unique_sorted("phase", cols),
        first_ingest=ingested.min(),
        last_ingest=ingested.max(),
        batch_ids=_unique_sorted("batch_id", cols),
        suffix_violations=_suffix_violation(lane, cols),
    )
    if dtype_col is None:
        return agg.with_columns(dtype_rows=pl.lit([], dtype=pl.List(pl.String)))
    per = rows.group_by(PARTITION + [dtype_col]).len().sort(dtype_col).with_columns(
        pair=pl.format("{}={}", pl.col(dtype_col).cast(pl.String), pl.col("len")))
    per = per.group_by(PARTITION).agg(dtype_rows=pl.col("pair"))
    return agg.join(per, on=PARTITION, how="left")


def _status() -> pl.Expr:
    return (
        pl.when((pl.col("rows") == 0) & (pl.col("failed_cases").fill_null(0) > 0)).then(pl.lit("failed"))
        .when(pl.col("rows") == 0).then(pl.lit("missing"))
        .when(~pl.col("expected")).then(pl.lit("unexpected"))
        .when((pl.col("meta_status") == "partial") | (pl.col("claim").is_not_null() & (pl.col("rows") < pl.col("claim"))))
        .then(pl.lit("partial"))
        .otherwise(pl.lit("done"))
    )


def derive_lane_cells(spec: ModelSpec, lane: LaneSpec, table_rows: pl.DataFrame,
                      meta: pl.DataFrame | None = None) -> pl.DataFrame:
    """Cells of one lane.

    Args:
        table_rows: curated rows of `lane.table` (rows outside the model's systems are ignored); the
            lineage columns system/backend/version (folder version), row_version, batch_id and
            ingested_at are used when present.
        meta: one row per system/backend/version of this table with meta_status, meta_collected_at,
            meta_image (the latest batch's collection_meta), or None.
    Returns:
        a frame with CELLS_SCHEMA; expected cells with no rows get rows 0 and status `missing`.
    """
    if table_rows.height:
        in_scope = pl.col("system").is_in(list(spec.systems))
        rows = table_rows.filter(in_scope & lane_filter(spec, lane, table_rows.columns))
    else:
        rows = table_rows
    found = _aggregate(spec, lane, rows) if rows.height else pl.DataFrame(schema=dict.fromkeys(PARTITION, pl.String))
    claims = pl.DataFrame([(c.system, c.backend, c.version, c.rows) for c in lane.claims],
                          schema={**dict.fromkeys(PARTITION, pl.String), "claim": pl.Int64}, orient="row")
    cells = expected_cells(spec, lane).join(found, on=PARTITION, how="full", coalesce=True)
    cells = cells.join(claims, on=PARTITION, how="left")
    if meta is not None and meta.height:
        present = [c for c in META_COLUMNS if c in meta.columns]
        cells = cells.join(meta.select(PARTITION + present).cast({c: META_COLUMNS[c] for c in present}),
                           on=PARTITION, how="left")
    cells = cells.with_columns(
        model=pl.lit(spec.model), lane=pl.lit(lane.lane_id), table=pl.lit(lane.table),
        expected=pl.col("expected").fill_null(False),
        rows=pl.col("rows").fill_null(0) if "rows" in cells.columns else pl.lit(0, pl.Int64),
    )
    for name, dtype in CELLS_SCHEMA.items():
        if name not in cells.columns:
            cells = cells.with_columns(pl.lit(None, dtype=dtype).alias(name))
    empty = pl.lit([], dtype=pl.List(pl.String))
    cells = cells.with_columns(
        [pl.col(c).fill_null(empty) for c in ("kernel_sources", "dtypes", "dtype_rows", "phases", "batch_ids")]
        + [pl.col("suffix_violations").fill_null(0)]
    ).with_columns(status=_status())
    return cells.select([pl.col(c).cast(t) for c, t in CELLS_SCHEMA.items()]).sort(PARTITION)


def derive_cells(spec: ModelSpec, tables: dict[str, pl.DataFrame],
                 meta: dict[str, pl.DataFrame] | None = None) -> pl.DataFrame:
    """All cells of a model, lanes in spec order; `tables`/`meta` are keyed by table name."""
    meta = meta or {}
    empty = pl.DataFrame()
    parts = [derive_lane_cells(spec, lane, tables.get(lane.table, empty), meta.get(lane.table)) for lane in spec.lanes]
    return pl.concat(parts, how="vertical") if parts else pl.DataFrame(schema=CELLS_SCHEMA)


def mismatches(cells: pl.DataFrame) -> list[dict]:
    """Claim vs actual drift and suffix-rule violations, one dict per offending cell."""
    out = []
    for c in cells.iter_rows(named=True):
        where = {k: c[k] for k in ("lane", "system", "backend", "version")}
        if c["claim"] is not None and c["claim"] != c["rows"]:
            out.append({**where, "kind": "claim", "claim": c["claim"], "actual": c["rows"],
                        "delta": c["rows"] - c["claim"]})
        if c["suffix_violations"]:
            out.append({**where, "kind": "suffix_rule", "rows": c["suffix_violations"],
                        "kernel_sources": c["kernel_sources"]})
    return out
