"""The ingest hook: after each successful commit, append ledger events for every lane cell it changed."""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from perfledger.ledger.cells import derive_cells
from perfledger.ledger.record import SCOPE, record_cells
from perfledger.ledger.source import now_iso, read_lane_tables, read_meta, read_or_empty
from perfledger.ledger.specs import LANES_DIR, load_all
from perfledger.ledger.state import has_state, remember

SEEN_TABLE = "ledger_hook_batches"
SEEN_SCHEMA = {"batch_id": pl.String, "processed_at": pl.String}


def touched_partitions(batch_tables: pl.DataFrame, batches: pl.DataFrame,
                       batch_ids: list[str]) -> dict[str, set[tuple[str, str, str]]]:
    """Table -> the (system, backend, version) partitions the given batches wrote."""
    if not batch_tables.height or not batches.height:
        return {}
    own = [c for c in ("system", "backend", "version") if c in batch_tables.columns]
    bt = batch_tables.filter(pl.col("batch_id").is_in(batch_ids)).select("batch_id", "table", *own)
    extra = [c for c in ("system", "backend", "version") if c not in own]
    joined = bt.join(batches.select("batch_id", *extra), on="batch_id", how="inner")
    out: dict[str, set[tuple[str, str, str]]] = {}
    for table, system, backend, version in joined.select("table", "system", "backend", "version").unique().iter_rows():
        out.setdefault(table, set()).add((system, backend, version))
    return out


def pending_batches(batches: pl.DataFrame, seen: pl.DataFrame, batch_ids: list[str]) -> list[str]:
    """The given batches plus every committed batch the hook has not processed yet (an ingest killed
    between its `batches` commit and this hook is caught up by the next ingest)."""
    done = set(seen["batch_id"].to_list()) if seen.height else set()
    committed = batches["batch_id"].to_list() if batches.height else []
    known = set(committed)
    return list(dict.fromkeys([*(b for b in batch_ids if b in known), *(b for b in committed if b not in done)]))


def on_ingest(wh, batch_ids: list[str], lanes_dir=LANES_DIR) -> int:
    """Called by the ingest after every run (also one with nothing new); returns the events appended.

    Only cells in partitions the pending batches wrote are re-derived (a cheap partition read per table);
    re-processing a batch appends nothing, because events are differences of cells.
    """
    batch_tables, batches = read_or_empty(wh, "batch_tables"), read_or_empty(wh, "batches")
    seen = read_or_empty(wh, SEEN_TABLE, schema=SEEN_SCHEMA)
    batch_ids = pending_batches(batches, seen, list(batch_ids))
    if not batch_ids:
        return 0
    touched = touched_partitions(batch_tables, batches, batch_ids)
    if not touched:
        _mark_seen(wh, batch_ids, seen)
        return 0
    appended = 0
    meta = None
    for spec in load_all(lanes_dir):
        lanes = tuple(lane for lane in spec.lanes if lane.table in touched)
        if not lanes:
            continue
        meta = meta if meta is not None else read_meta(wh)
        sub = replace(spec, lanes=lanes)
        cells = derive_cells(sub, read_lane_tables(wh, sub, partitions=touched), meta)
        scope = pl.DataFrame(
            [(lane.lane_id, s, b, v) for lane in lanes for s, b, v in touched[lane.table]],
            schema=dict.fromkeys(SCOPE, pl.String), orient="row",
        )
        cells = cells.join(scope, on=SCOPE, how="semi")
        appended += record_cells(wh, spec.model, cells, list(batch_ids), scope).height
        if has_state(wh, spec):  # the stored cells now reflect every partition again
            remember(wh, spec)
    _mark_seen(wh, batch_ids, seen)
    return appended


def _mark_seen(wh, batch_ids: list[str], seen: pl.DataFrame) -> None:
    """Remember processed batches (only new ones: re-deriving a known batch writes nothing)."""
    new = [b for b in batch_ids if b not in set(seen["batch_id"].to_list() if seen.height else [])]
    if new:
        wh.write_table(SEEN_TABLE, pl.DataFrame({"batch_id": new, "processed_at": [now_iso()] * len(new)},
                                                schema=SEEN_SCHEMA))
