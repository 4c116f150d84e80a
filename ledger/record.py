"""Keep the stored cell state current and append an event for every cell that changed since."""

from __future__ import annotations

from itertools import chain

import polars as pl

from perfledger.ledger.cells import CELLS_SCHEMA
from perfledger.ledger.events import EVENTS_SCHEMA, derive_events
from perfledger.ledger.source import CELLS_TABLE, EVENTS_TABLE, build_cells, now_iso, read_or_empty
from perfledger.ledger.specs import ModelSpec
from perfledger.warehouse.lock import run_lock

SCOPE = ["lane", "system", "backend", "version"]


def _same(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    key = ["model", *SCOPE]
    return a.height == b.height and a.sort(key).equals(b.select(a.columns).sort(key))


def record_cells(wh, model: str, after: pl.DataFrame, batch_ids: list[str] | None = None,
                 scope: pl.DataFrame | None = None) -> pl.DataFrame:
    """Diff `after` against the stored state of `model`, append events, store the new state.

    Args:
        after: freshly derived cells (CELLS_SCHEMA) of the model, all of them or those in `scope`.
        batch_ids: the batches just committed; None (a full build) credits each cell's own batches.
        scope: lane/system/backend/version rows the diff is limited to; None = the whole model.
    Returns:
        the events appended (possibly empty).
    """
    state = read_or_empty(wh, CELLS_TABLE, schema=CELLS_SCHEMA)
    state = state.select(list(CELLS_SCHEMA)).cast(CELLS_SCHEMA) if state.height else pl.DataFrame(schema=CELLS_SCHEMA)
    mine = pl.col("model") == model
    before = state.filter(mine)
    if scope is not None:
        before = before.join(scope.select(SCOPE), on=SCOPE, how="semi")
    ids = batch_ids if batch_ids is not None else sorted(set(chain.from_iterable(after["batch_ids"].to_list())))
    events = derive_events(before, after, ids, now_iso())
    if events.height:
        wh.write_table(EVENTS_TABLE, events.cast(EVENTS_SCHEMA), mode="append")
    after = after.select(list(CELLS_SCHEMA)).cast(CELLS_SCHEMA)
    if _same(before, after):
        return events
    if scope is None:
        kept = state.filter(~mine)
    else:
        inside = state.filter(mine).join(scope.select(SCOPE), on=SCOPE, how="semi")
        kept = state.join(inside.select(["model", *SCOPE]), on=["model", *SCOPE], how="anti")
    wh.write_table(CELLS_TABLE, pl.concat([kept, after]), mode="overwrite")
    return events


def rebuild_cells(wh, spec: ModelSpec) -> pl.DataFrame:
    """Derive every cell of the model from the warehouse and record them (events for changes) under the
    warehouse's write lock, so concurrent writers cannot interleave; returns the cells."""
    cells = build_cells(wh, spec)
    with run_lock(wh.root, purpose=f"ledger {spec.model}"):
        record_cells(wh, spec.model, cells)
    return cells


def stored_events(wh, model: str) -> pl.DataFrame:
    events = read_or_empty(wh, EVENTS_TABLE, schema=EVENTS_SCHEMA)
    if not events.height:
        return pl.DataFrame(schema=EVENTS_SCHEMA)
    return events.filter(pl.col("model") == model).sort(["at", "lane", "system", "backend", "version"])
