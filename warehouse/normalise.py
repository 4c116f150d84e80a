"""Turn one raw source file into curated rows, quarantined rows and repeated-key rows (pure).

Columns are mapped by name, types unified (string/large_string, int64, float64), the folder's
system/backend/version attached (the row's own `version` is kept as `row_version`), framework labels
normalised, microsecond metrics given millisecond twins, every row checked against the table's
contract, and repeated keys resolved first-wins (the public loader's rule) with the repeats kept.
A cast that would change a value (3.5 to an integer, a boolean or timestamp to a latency) quarantines
the row; a data column named like a lineage column is kept under `<name>_in_file`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from perfledger.safe_io import quoted
from perfledger.schemas.catalog import Catalog, TableSpec
from perfledger.schemas.contracts import FINDING_SCHEMA, validate_rows
from perfledger.warehouse.readers import ROW_INDEX, RawFile, SourceFileError, cell_text

DESCRIPTIVE_NON_IDENTITY = ("framework", "version", "device")
LINEAGE_COLUMNS = ("system", "family", "backend", "batch_id", "source_file", "source_row", "ingested_at")
RENAMED_SUFFIX = "_in_file"


@dataclass(frozen=True)
class Lineage:
    """Where a file's rows come from; stamped on every row."""

    batch_id: str
    system: str
    family: str
    backend: str
    version: str
    source_file: str
    ingested_at: datetime


@dataclass
class NormalisedTable:
    family: str
    curated: pl.DataFrame
    quarantine: pl.DataFrame
    advisories: pl.DataFrame
    duplicates: pl.DataFrame
    rows_in: int
    extra_columns: list[str]

    rows_accepted: int = 0

    def __post_init__(self) -> None:
        self.rows_accepted = self.rows_accepted or self.curated.height

    def without_curated(self) -> NormalisedTable:
        """The same outcome with the curated rows released (they are flushed separately)."""
        return NormalisedTable(self.family, self.curated.clear(), self.quarantine, self.advisories, self.duplicates,
                               self.rows_in, self.extra_columns, self.rows_accepted)

    @property
    def rows_quarantined(self) -> int:
        return self.quarantine["source_row"].n_unique() if not self.quarantine.is_empty() else 0

    @property
    def rows_duplicate(self) -> int:
        return self.duplicates.height


_BOOL_TEXT = {"true": True, "1": True, "false": False, "0": False}


def _cast(column: pl.Series, dtype: pl.DataType) -> tuple[pl.Series, pl.Series]:
    """(cast, changed): never raises; a value that does not convert is null in `cast`, one the cast
    would change (3.5 to an integer, 2**53 + 1 to a float) is null too and flagged in `changed`.
    Text parses; numbers, booleans and dates become text as written; only numbers become numbers."""
    unchanged = pl.Series(column.name, [False] * len(column), dtype=pl.Boolean)
    if column.dtype == dtype:
        return column, unchanged
    if column.dtype == pl.String:
        if dtype == pl.Boolean:
            return column.str.to_lowercase().replace_strict(_BOOL_TEXT, default=None, return_dtype=pl.Boolean), unchanged
        return column.cast(dtype, strict=False), unchanged
    if dtype == pl.String:
        return column.cast(pl.String), unchanged
    if not (column.dtype.is_numeric() and (dtype.is_numeric() or dtype == pl.Boolean)):
        return pl.Series(column.name, [None] * len(column), dtype=dtype), unchanged
    cast = column.cast(dtype, strict=False)
    back = cast.cast(column.dtype, strict=False)
    changed = cast.is_not_null() & back.ne_missing(column)
    if column.dtype.is_float():
        changed &= ~column.is_nan()  # NaN stays NaN (the contract names it)
    if not changed.any():
        return cast, unchanged
    return cast.scatter(changed.arg_true(), None), changed


def _target_types(spec: TableSpec, catalog: Catalog) -> dict[str, pl.DataType]:
    types: dict[str, pl.DataType] = {c: pl.String for c in catalog.descriptive}
    types.update(spec.keys)
    types.update({m: pl.Float64 for m in spec.metrics})
    return types


def _check_columns(raw: pl.DataFrame, spec: TableSpec, catalog: Catalog, source: str) -> None:
    present = set(raw.columns)
    needed = set(spec.required_columns) | set(catalog.identity)
    if not spec.legacy_without_descriptive:
        needed |= set(DESCRIPTIVE_NON_IDENTITY)
    missing = sorted(needed - present)
    if missing:
        raise SourceFileError(source, f"table {spec.name}: missing column(s) {missing}")


@dataclass
class TypedFile:
    """One file's rows with unified types and lineage, not yet validated (validation runs per window)."""

    spec: TableSpec
    lineage: Lineage
    frame: pl.DataFrame
    cast_findings: pl.DataFrame
    rejects: list[dict]
    extra_columns: list[str]
    texts: pl.DataFrame | None = None  # a CSV's cells as written (quarantine keeps them beside the parsed value)
    renamed_columns: list[str] = field(default_factory=list)

    @property
    def rows_in(self) -> int:
        return self.frame.height + len(self.rejects)


def reserved_columns(spec: TableSpec) -> set[str]:
    """Names the ingest writes itself: lineage, the row's own version and the millisecond twins."""
    return {*LINEAGE_COLUMNS, "row_version", *(m.removesuffix("_us") + "_ms" for m in spec.microsecond_metrics)}


def _keep_reserved(frame: pl.DataFrame, spec: TableSpec, source: str) -> tuple[pl.DataFrame, list[str]]:
    """Data columns named like reserved ones move to `<name>_in_file` (values kept, never overwritten)."""
    clashes = sorted(reserved_columns(spec) & set(frame.columns))
    taken = [c + RENAMED_SUFFIX for c in clashes if c + RENAMED_SUFFIX in frame.columns]
    if taken:
        raise SourceFileError(source, f"table {spec.name}: columns {quoted(clashes)} are reserved and "
                                      f"{quoted(taken)} exist too; rename them in the file")
    return frame.rename({c: c + RENAMED_SUFFIX for c in clashes}), clashes


def type_file(raw: RawFile, spec: TableSpec, catalog: Catalog, lineage: Lineage) -> TypedFile:
    """Map columns by name, unify types, attach lineage; a value that does not convert, or would
    change in the conversion, is a finding."""
    frame = raw.frame.rename({k: v for k, v in spec.renames.items() if k in raw.frame.columns and v not in raw.frame.columns})
    frame, renamed = _keep_reserved(frame, spec, lineage.source_file)
    _check_columns(frame, spec, catalog, lineage.source_file)
    types = _target_types(spec, catalog)
    extras = [c for c in frame.columns if c not in types and c != ROW_INDEX]
    cast_findings: list[pl.DataFrame] = [pl.DataFrame(schema=FINDING_SCHEMA)]
    columns: dict[str, pl.Series] = {}
    for name, dtype in types.items():
        if name not in frame.columns:
            columns[name] = pl.Series(name, [None] * frame.height, dtype=dtype)
            continue
        original = frame[name]
        cast, changed = _cast(original, dtype)
        failed = original.is_not_null() & cast.is_null()
        if failed.any():
            positions = failed.arg_true()
            checks = changed.gather(positions).replace_strict({True: f"lossy_{dtype}".lower()},
                                                              default=f"dtype_{dtype}".lower(), return_dtype=pl.String)
            cast_findings.append(pl.DataFrame({
                "row_index": positions.cast(pl.Int64), "check": checks,
                "column": name, "value": original.gather(positions).cast(pl.String), "severity": "error",
            }))
        columns[name] = cast
    typed = _with_lineage(pl.DataFrame(columns), frame, spec, catalog, lineage, extras)
    return TypedFile(spec, lineage, typed, pl.concat(cast_findings, how="vertical_relaxed"), raw.rejects, extras,
                     frame if raw.kind == "csv" else None, renamed)


def finalise(typed: TypedFile, findings: pl.DataFrame, catalog: Catalog) -> NormalisedTable:
    """Apply a file's findings: error rows to quarantine, warnings to advisories, repeats split off."""
    findings = pl.concat([typed.cast_findings, findings], how="vertical_relaxed")
    errors = findings.filter(pl.col("severity") == "error")
    frame = typed.frame
    if errors.is_empty():
        accepted = frame
    else:
        accepted = frame.filter(~pl.int_range(frame.height).is_in(errors["row_index"].unique().implode()))
    first, repeats = split_repeats(accepted, typed.spec, catalog)
    return NormalisedTable(
        family=typed.lineage.family,
        curated=first,
        quarantine=_quarantine_rows(errors, typed, keep_raw=True),
        advisories=_quarantine_rows(findings.filter(pl.col("severity") == "warning"), typed, keep_raw=False),
        duplicates=repeats,
        rows_in=typed.rows_in,
        extra_columns=typed.extra_columns,
    )


def normalise_table(raw: RawFile, spec: TableSpec, catalog: Catalog, lineage: Lineage) -> NormalisedTable:
    """Type, validate and finalise one file on its own (the windowed path validates many at once)."""
    typed = type_file(raw, spec, catalog, lineage)
    return finalise(typed, validate_rows(spec, typed.frame), catalog)


def _with_lineage(typed: pl.DataFrame, frame: pl.DataFrame, spec: TableSpec, catalog: Catalog,
                  lineage: Lineage, extras: list[str]) -> pl.DataFrame:
    labels = typed["framework"].unique().to_list()
    mapping = {label: catalog.normalise_framework(label) for label in labels if label is not None}
    twins = [(pl.col(m) * 1e-3).alias(m.removesuffix("_us") + "_ms") for m in spec.microsecond_metrics]
    return typed.with_columns(
        pl.col("framework").replace_strict(mapping, default=None, return_dtype=pl.String)
        .fill_null(pl.lit(lineage.backend)).alias("framework"),
        pl.col("version").alias("row_version"),
        *twins,
        *[frame[c].cast(pl.String) for c in extras],
    ).with_columns(
        pl.lit(lineage.system).alias("system"),
        pl.lit(lineage.family).alias("family"),
        pl.lit(lineage.backend).alias("backend"),
        pl.lit(lineage.version).alias("version"),
        pl.lit(lineage.batch_id).alias("batch_id"),
        pl.lit(lineage.source_file).alias("source_file"),
        frame[ROW_INDEX].alias("source_row"),
        pl.lit(lineage.ingested_at).dt.replace_time_zone("UTC").alias("ingested_at"),
    )


def key_columns(spec: TableSpec, catalog: Catalog) -> list[str]:
    """The columns that identify one measurement: the table's keys plus op_name and kernel_source."""
    return [*catalog.identity, *spec.keys]


def split_repeats(accepted: pl.DataFrame, spec: TableSpec, catalog: Catalog) -> tuple[pl.DataFrame, pl.DataFrame]:
    """First measurement of each key is curated; later ones go to `duplicates` with their spread."""
    keys = key_columns(spec, catalog)
    if not accepted.select(keys).is_duplicated().any():
        first_mask = None
    else:
        first_mask = accepted.select(pl.struct(keys).is_first_distinct()).to_series()
    if first_mask is None:
        return accepted, accepted.clear().with_columns(
            pl.lit(None, pl.Int64).alias("kept_source_row"), pl.lit(None, pl.Float64).alias("kept_value"),
            pl.lit(None, pl.Float64).alias("spread_rel"))
    metric = spec.primary_metric
    first = accepted.filter(first_mask)
    kept = first.select([*keys, pl.col("source_row").alias("kept_source_row"), pl.col(metric).alias("kept_value")])
    repeats = accepted.filter(~first_mask).join(kept, on=keys, how="left", nulls_equal=True)
    spread = ((pl.col(metric) - pl.col("kept_value")).abs() / pl.col("kept_value").abs()).alias("spread_rel")
    return first, repeats.with_columns(spread)


def _text_in_file(typed: TypedFile, row_index: int, column: str | None, value: str | None) -> str | None:
    """The cell as written in the file (a CSV's text; a Parquet cell is stored as parsed)."""
    if typed.texts is None or column is None or column not in typed.texts.columns:
        return value
    return typed.texts[column][row_index]


def _quarantine_rows(findings: pl.DataFrame, typed: TypedFile, keep_raw: bool) -> pl.DataFrame:
    """One row per finding with file, line/row, check, column, the parsed value and the text in the file,
    and (for rejects) the row as read."""
    frame, lineage = typed.frame, typed.lineage
    data_columns = [c for c in frame.columns if c not in LINEAGE_COLUMNS]
    rows = []
    for row_index, check, column, value in findings.select("row_index", "check", "column", "value").iter_rows():
        record = frame.row(row_index, named=True)
        raw_row = json.dumps({c: record[c] for c in data_columns}, default=str) if keep_raw else None
        text = _text_in_file(typed, row_index, column, value)
        rows.append((record["source_row"], check, column, _cut(value), _cut(text), raw_row))
    if keep_raw:
        rows.extend((r["line"], r["check"], r["column"], r["value"], r["text"], None) for r in typed.rejects)
    out = pl.DataFrame(rows, schema={"source_row": pl.Int64, "check": pl.String, "column": pl.String,
                                     "value": pl.String, "value_in_file": pl.String, "raw_row": pl.String},
                       orient="row")
    return out.with_columns(
        pl.lit(lineage.batch_id).alias("batch_id"), pl.lit(typed.spec.name).alias("table"),
        pl.lit(lineage.system).alias("system"), pl.lit(lineage.backend).alias("backend"),
        pl.lit(lineage.version).alias("version"), pl.lit(lineage.source_file).alias("source_file"),
    ).sort("source_row")


def _cut(text: str | None) -> str | None:
    return None if text is None else cell_text(text)
