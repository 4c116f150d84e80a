"""The ingest hook: after each successful commit, append ledger events for every lane cell it changed."""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from ledger.cells import derive_cells
from ledger.record import SCOPE, record_cells
from ledger.source import read_lane_tables, read_meta, read_or_empty
from ledger.specs import LANES_DIR, load_all
from ledger.state import has_state, remember


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


def on_ingest(wh, batch_ids: list[str], lanes_dir=LANES_DIR) -> int:
    """Called by the ingest flow after a commit; returns the number of events appended.

    Only cells in partitions the batches wrote are re-derived (a cheap partition read per table).
    """
    if not batch_ids:
        return 0
    batch_tables, batches = read_or_empty(wh, "batch_tables"), read_or_empty(wh, "batches")
    touched = touched_partitions(batch_tables, batches, list(batch_ids))
    if not touched:
        return 0
    appended = 0
    meta = None
    for spec in load_all(lanes_dir):
        lanes = tuple(l for l in spec.lanes if l.table in touched)
        if not lanes:
            continue
        meta = meta if meta is not None else read_meta(wh)
        sub = replace(spec, lanes=lanes)
        cells = derive_cells(sub, read_lane_tables(wh, sub, partitions=touched), meta)
        scope = pl.DataFrame(
            [(l.lane_id, s, b, v) for l in lanes for s, b, v in touched[l.table]],
            schema=dict.fromkeys(SCOPE, pl.String), orient="row",
        )
        cells = cells.join(scope, on=SCOPE, how="semi")
        appended += record_cells(wh, spec.model, cells, list(batch_ids), scope).height
        if has_state(wh, spec):  # the stored cells now reflect every partition again
            remember(wh, spec)
    return appended
