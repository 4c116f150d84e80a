"""Per-cell collection metadata: the latest ingested batch's collection_meta for each table partition."""

from __future__ import annotations

import polars as pl

from perfledger.ledger.cells import META_COLUMNS, PARTITION


def latest_meta(batch_tables: pl.DataFrame, batches: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Table -> one row per system/backend/version with meta_status, meta_collected_at, meta_image, failed_cases.

    Args:
        batch_tables: one row per (batch_id, table) with the collection_meta fields.
        batches: one row per batch with system, backend, version, status, finished_at (and meta_image).
    The latest `ingested` batch wins; a batch-level image fills a table-level gap.
    """
    if not batch_tables.height or not batches.height:
        return {}
    ok = batches.filter(pl.col("status") == "ingested") if "status" in batches.columns else batches
    extra = [c for c in ("finished_at", "meta_image") if c in ok.columns]
    own = [c for c in PARTITION if c in batch_tables.columns]  # batch_tables may carry the slice itself
    b = ok.select(["batch_id", *[c for c in PARTITION if c not in own], *extra])
    b = b.rename({"meta_image": "batch_image"} if "meta_image" in extra else {})
    bt = batch_tables.select(["batch_id", "table", *own, *[c for c in META_COLUMNS if c in batch_tables.columns]])
    joined = bt.join(b, on="batch_id", how="inner")
    for col, dtype in META_COLUMNS.items():
        joined = joined.with_columns(pl.col(col).cast(dtype) if col in joined.columns else pl.lit(None, dtype).alias(col))
    if "batch_image" in joined.columns:
        joined = joined.with_columns(meta_image=pl.coalesce("meta_image", pl.col("batch_image").cast(pl.String)))
    order = ["finished_at"] if "finished_at" in joined.columns else ["batch_id"]
    latest = joined.sort(order).group_by(["table", *PARTITION], maintain_order=True).last()
    return {t: g.drop("table") for (t,), g in latest.group_by("table")}
