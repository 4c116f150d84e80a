"""Warehouse reads and writes for the ledger: lane tables, batch metadata, ledger tables, as-of.

The only ledger module that talks to the warehouse; everything it returns is a plain polars frame.
"""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from perfledger.ledger.cells import derive_cells
from perfledger.ledger.meta import latest_meta
from perfledger.ledger.specs import ModelSpec

CELLS_TABLE = "ledger_cells"
EVENTS_TABLE = "ledger_events"
DECISIONS_TABLE = "ledger_decisions"
MATRIX_TABLE = "support_matrix"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def resolve_as_of(wh, value: str | None) -> str | None:
    """`--as-of`: an ISO timestamp passes through; an integer is a version of the warehouse's `batches`
    table (one commit per ingest), turned into that commit's timestamp so every table travels together."""
    if value is None:
        return None
    if not value.strip().isdigit():
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"--as-of {value!r}: expected an ISO timestamp or a version of the batches table") from None
        return value
    version = int(value)
    for entry in wh.table_history("batches"):
        if int(entry["version"]) == version:
            ts = entry["timestamp"]  # Delta commit time, ms since the epoch
            if isinstance(ts, (int, float)):
                ts = datetime.fromtimestamp(ts / 1000, tz=UTC)
            return ts.isoformat() if hasattr(ts, "isoformat") else str(ts)
    raise ValueError(f"--as-of {value}: the warehouse's batches table has no version {version}")


def read_or_empty(wh, name: str, as_of: str | None = None, schema: dict | None = None) -> pl.DataFrame:
    """An auxiliary table, or an empty frame when it does not exist (yet, or at `as_of`)."""
    if wh.table_version(name) is None:
        return pl.DataFrame(schema=schema or {})
    try:
        return wh.read_table(name, as_of=as_of)
    except Exception:  # noqa: BLE001 -- a table created after as_of has no state then
        if as_of is None:
            raise
        return pl.DataFrame(schema=schema or {})


def read_lane_tables(wh, spec: ModelSpec, as_of: str | None = None,
                     partitions: dict[str, set[tuple[str, str, str]]] | None = None) -> dict[str, pl.DataFrame]:
    """Curated rows of each table the spec's lanes use, on the model's systems only.

    One partition-pruned read per system (a whole-table read of moe_perf costs seconds); with
    `partitions`, only those (system, backend, version) slices are read.
    """
    present = set(wh.curated_tables())
    out: dict[str, pl.DataFrame] = {}
    for table in dict.fromkeys(lane.table for lane in spec.lanes):
        if table not in present:
            continue
        columns = None if as_of is not None else lane_columns(spec, table, table_columns(wh, table))
        if partitions is None:
            slices = [{"system": s} for s in spec.systems]
        else:
            slices = [{"system": s, "backend": b, "version": v} for s, b, v in sorted(partitions.get(table, ()))
                      if s in spec.systems]
        parts = []
        for where in slices:
            try:
                parts.append(wh.read_curated(table, as_of=as_of, columns=columns, **where))
            except Exception:  # noqa: BLE001 -- the table did not exist yet at as_of
                if as_of is None:
                    raise
        parts = [p for p in parts if p.height]
        if parts:
            out[table] = pl.concat(parts, how="diagonal_relaxed")
    return out


def table_columns(wh, table: str) -> list[str]:
    """A curated table's current columns, in schema order (read from the Delta log, no data)."""
    return [f.name for f in wh.delta_table(wh.curated_uri(table)).schema().fields]


def lane_columns(spec: ModelSpec, table: str, available: list[str]) -> list[str]:
    """The columns the cells of the spec's lanes on `table` use (partition, lineage, filters, dtype,
    kernel source, phase), in the table's own order -- so the first `*_dtype` column stays first.
    Reading only these cuts a wide table's read (moe_perf) several-fold."""
    wanted = {"kernel_source", "phase", "system", "backend", "version", "row_version", "batch_id", "ingested_at"}
    for lane in spec.lanes:
        if lane.table == table:
            wanted |= set(lane.filter) | ({lane.dtype_column} if lane.dtype_column else set())
    return [c for c in available if c in wanted or c.endswith("_dtype")]


def read_meta(wh, as_of: str | None = None) -> dict[str, pl.DataFrame]:
    return latest_meta(read_or_empty(wh, "batch_tables", as_of), read_or_empty(wh, "batches", as_of))


def build_cells(wh, spec: ModelSpec, as_of: str | None = None) -> pl.DataFrame:
    """The model's cells from the warehouse (now, or as of a timestamp)."""
    return derive_cells(spec, read_lane_tables(wh, spec, as_of), read_meta(wh, as_of))

