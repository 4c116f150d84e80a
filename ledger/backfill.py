"""Manual backfills: re-derive ledger cells for batches collected in a date window (idempotent).

A batch's collection date is its collection_meta `collected_at` (earliest over its tables), else the
day it was ingested. Re-deriving goes through the ledger's own ingest hook, which appends an event
only where a cell changed, so running the same backfill twice changes nothing the second time.
"""

from __future__ import annotations

from datetime import date

import polars as pl

from perfledger.warehouse.lock import run_lock


class BackfillError(ValueError):
    """A backfill window or filter that cannot be used."""


def parse_day(value: str, flag: str) -> date:
    try:
        return date.fromisoformat(value[:10])
    except ValueError:
        raise BackfillError(f"{flag} {value!r}: expected a date YYYY-MM-DD") from None


def collection_dates(batches: pl.DataFrame, batch_tables: pl.DataFrame) -> pl.DataFrame:
    """batch_id, system, collected (date) for every ingested batch."""
    if not batches.height:
        return pl.DataFrame(schema={"batch_id": pl.String, "system": pl.String, "collected": pl.Date})
    meta = pl.DataFrame(schema={"batch_id": pl.String, "meta_day": pl.Date})
    if batch_tables.height and "meta_collected_at" in batch_tables.columns:
        meta = (batch_tables.select("batch_id", pl.col("meta_collected_at").cast(pl.String).str.slice(0, 10)
                                    .str.to_date(strict=False).alias("meta_day"))
                .group_by("batch_id").agg(pl.col("meta_day").min()))
    ingested = pl.col("started_at").cast(pl.Datetime("us", "UTC")).dt.date()
    return (batches.select("batch_id", "system", ingested.alias("ingest_day"))
            .join(meta, on="batch_id", how="left")
            .select("batch_id", "system", pl.coalesce("meta_day", "ingest_day").alias("collected"))
            .unique("batch_id", keep="first").sort("batch_id"))


def window_batches(dates: pl.DataFrame, since: date, until: date | None, systems: list[str] | None) -> list[str]:
    keep = pl.col("collected") >= since
    if until is not None:
        keep &= pl.col("collected") <= until
    if systems:
        keep &= pl.col("system").is_in(systems)
    return dates.filter(keep)["batch_id"].to_list()


def parse_window(window: dict) -> tuple[date, date | None]:
    """(since, until) of a backfill window; a bad day or an --until before --since is a BackfillError. The CLI
    checks this before it starts Prefect, so the message comes alone, not after a flow's traceback."""
    since = parse_day(window["since"], "--since")
    until = parse_day(window["until"], "--until") if window.get("until") else None
    if until is not None and until < since:
        raise BackfillError(f"--until {until} is before --since {since}")
    return since, until


def rederive(wh, window: dict) -> dict:
    """Re-run the ledger hook over the window's batches; returns what was selected and appended."""
    from perfledger.ledger.hooks import on_ingest
    from perfledger.ledger.source import read_or_empty

    since, until = parse_window(window)
    dates = collection_dates(read_or_empty(wh, "batches"), read_or_empty(wh, "batch_tables"))
    ids = window_batches(dates, since, until, window.get("systems"))
    with run_lock(wh.root, purpose="backfill"):
        events = on_ingest(wh, ids) if ids else 0
    return {"since": str(since), "until": str(until) if until else None, "systems": window.get("systems") or [],
            "batches": len(ids), "events": events}
