"""Pandera DataFrameModels (polars backend) derived from the catalog, and row-level findings.

Two models per table: the *contract* (a failure quarantines the row) and the *advisory* model
(unknown enumeration values: the row is kept and the value reported).
"""

from __future__ import annotations

from functools import cache

import pandera.polars as pa
import polars as pl
from pandera import extensions
from pandera.errors import SchemaErrors

from perfledger.schemas.catalog import Catalog, TableSpec, load_catalog

FINDING_SCHEMA = {
    "row_index": pl.Int64,
    "check": pl.String,
    "column": pl.String,
    "value": pl.String,
    "severity": pl.String,
}


@extensions.register_check_method()
def finite(data: pa.PolarsData) -> pl.LazyFrame:
    """Durations and power must be real numbers: NaN and +/-inf fail, nulls are left to `nullable`."""
    column = pl.col(data.key)
    return data.lazyframe.select(column.is_finite() | column.is_null())


@extensions.register_check_method()
def not_blank(data: pa.PolarsData) -> pl.LazyFrame:
    """Identity labels (op_name, kernel_source) must hold text, not just spaces."""
    return data.lazyframe.select(pl.col(data.key).str.strip_chars().str.len_chars() > 0)


def _model(name: str, annotations: dict, fields: dict) -> type[pa.DataFrameModel]:
    config = type("Config", (), {"strict": False, "coerce": False, "name": name})
    return type(name, (pa.DataFrameModel,), {"__annotations__": annotations, **fields, "Config": config})


@cache
def contract_model(table: str) -> type[pa.DataFrameModel]:
    """The rules every curated row of `table` satisfies: non-null keys, finite (positive) durations."""
    catalog = load_catalog()
    spec = catalog.table(table)
    annotations: dict = {}
    fields: dict = {}
    for column, dtype in spec.keys.items():
        annotations[column] = dtype
        bounds = {"ge": 0} if dtype == pl.Int64 else {}
        fields[column] = pa.Field(nullable=column in spec.optional, **bounds)
    for column, unit in spec.metrics.items():
        annotations[column] = pl.Float64
        optional = column in spec.optional
        if unit in ("ms", "us"):
            if spec.latency_may_be_nonpositive:
                positive = {}
            else:
                positive = {"ge": 0} if column in spec.may_be_zero else {"gt": 0}
            fields[column] = pa.Field(nullable=optional, finite=(), **positive)
        else:
            fields[column] = pa.Field(nullable=True, ge=0, finite=())
    for column in catalog.identity:
        annotations[column] = pl.String
        fields[column] = pa.Field(nullable=False, not_blank=())
    return _model(f"{table}_contract", annotations, fields)


@cache
def advisory_model(table: str) -> type[pa.DataFrameModel] | None:
    """Known vocabularies for the table's categorical columns; None when it has none."""
    catalog = load_catalog()
    spec = catalog.table(table)
    enum_columns = [c for c in spec.keys if c in catalog.enums]
    if not enum_columns:
        return None
    annotations = {c: pl.String for c in enum_columns}
    fields = {c: pa.Field(nullable=True, isin=list(catalog.enums[c])) for c in enum_columns}
    return _model(f"{table}_advisory", annotations, fields)


def _findings(model: type[pa.DataFrameModel] | None, frame: pl.DataFrame, severity: str) -> pl.DataFrame:
    if model is None or frame.is_empty():
        return pl.DataFrame(schema=FINDING_SCHEMA)
    try:
        model.validate(frame, lazy=True)
    except SchemaErrors as exc:
        cases = exc.failure_cases
        if "index" not in cases.columns or cases["index"].is_null().any():
            raise  # a table-level failure (missing column, wrong dtype) is a bug upstream, not a row problem
        return cases.select(
            pl.col("index").cast(pl.Int64).alias("row_index"),
            pl.col("check").cast(pl.String),
            pl.col("column").cast(pl.String),
            pl.col("failure_case").cast(pl.String).alias("value"),
            pl.lit(severity).alias("severity"),
        )
    return pl.DataFrame(schema=FINDING_SCHEMA)


def _all_values_known(spec: TableSpec, frame: pl.DataFrame) -> bool:
    """Cheap pre-pass: the advisory model can only report something when a value is outside its enum."""
    enums = load_catalog().enums
    columns = [c for c in spec.keys if c in enums]
    checks = [pl.col(c).is_in(list(enums[c])) | pl.col(c).is_null() for c in columns]
    return not checks or bool(frame.select(pl.all_horizontal(checks).all()).item())


def validate_rows(spec: TableSpec, frame: pl.DataFrame) -> pl.DataFrame:
    """Run both models over a normalised frame; one finding per (row, failed check).

    Returns a frame with FINDING_SCHEMA: severity `error` rows must be quarantined, `warning` rows are
    kept and reported.
    """
    return pl.concat(
        [
            _findings(contract_model(spec.name), frame, "error"),
            _findings(None if _all_values_known(spec, frame) else advisory_model(spec.name), frame, "warning"),
        ]
    )


def catalog_models(catalog: Catalog | None = None) -> dict[str, type[pa.DataFrameModel]]:
    """Every table's contract model (used by docs and tests)."""
    catalog = catalog or load_catalog()
    return {name: contract_model(name) for name in catalog.tables}
