"""Warm builds: the stored cells are reused while the inputs they were derived from are unchanged.

The inputs key names the lane spec's content and the Delta versions of every table the cells read
(the lane tables, `batches`, `batch_tables`); any ingest or spec edit changes it, so a stale state is
never served. The ingest hook and `ledger build` keep the state and the key current together.
"""

from __future__ import annotations

import hashlib
import json

import polars as pl

from perfledger.ledger.cells import CELLS_SCHEMA
from perfledger.ledger.record import record_cells
from perfledger.ledger.source import CELLS_TABLE, build_cells, now_iso, read_or_empty
from perfledger.ledger.specs import ModelSpec

INPUTS_TABLE = "ledger_inputs"
INPUTS_SCHEMA = {"model": pl.String, "spec_key": pl.String, "inputs_key": pl.String, "recorded_at": pl.String}


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:20]


def spec_key(spec: ModelSpec) -> str:
    return _digest(spec.path.read_text() if spec.path.exists() else repr(spec))


def inputs_key(wh, spec: ModelSpec) -> str:
    """A digest of the spec and the current versions of every table the model's cells depend on."""
    versions = {t: wh.table_version(t, curated=True) for t in sorted({lane.table for lane in spec.lanes})}
    versions |= {t: wh.table_version(t) for t in ("batches", "batch_tables")}
    return _digest({"spec": spec_key(spec), "versions": versions})


def _stored(wh, model: str) -> dict | None:
    keys = read_or_empty(wh, INPUTS_TABLE, schema=INPUTS_SCHEMA)
    rows = keys.filter(pl.col("model") == model).to_dicts() if keys.height else []
    return rows[0] if rows else None


def has_state(wh, spec: ModelSpec) -> bool:
    """True when a full build of this very spec is stored (a hook may then refresh it partition-wise)."""
    stored = _stored(wh, spec.model)
    return stored is not None and stored["spec_key"] == spec_key(spec)


def remember(wh, spec: ModelSpec) -> None:
    """Mark the stored cells of `spec.model` as derived from the warehouse as it is now."""
    row = pl.DataFrame([{"model": spec.model, "spec_key": spec_key(spec), "inputs_key": inputs_key(wh, spec),
                         "recorded_at": now_iso()}], schema=INPUTS_SCHEMA)
    wh.replace_slices(wh.table_uri(INPUTS_TABLE), row, ["model"], [(spec.model,)])


def fresh_cells(wh, spec: ModelSpec) -> pl.DataFrame | None:
    """The stored cells when they match the current inputs, else None."""
    stored = _stored(wh, spec.model)
    if stored is None or stored["inputs_key"] != inputs_key(wh, spec):
        return None
    cells = read_or_empty(wh, CELLS_TABLE, schema=CELLS_SCHEMA)
    cells = cells.filter(pl.col("model") == spec.model) if cells.height else cells
    order = [lane.lane_id for lane in spec.lanes]
    return (cells.select(list(CELLS_SCHEMA)).cast(CELLS_SCHEMA)
            .with_columns(_o=pl.col("lane").replace_strict(order, list(range(len(order))), default=len(order)))
            .sort(["_o", "system", "backend", "version"]).drop("_o"))


def current_cells(wh, spec: ModelSpec, *, record: bool) -> tuple[pl.DataFrame, bool]:
    """(cells, reused): stored cells when fresh; otherwise derived (and recorded with events if asked)."""
    cells = fresh_cells(wh, spec)
    if cells is not None:
        return cells, True
    cells = build_cells(wh, spec)
    if record:
        record_cells(wh, spec.model, cells)
        remember(wh, spec)
    return cells, False
