"""A table's versions: when each was made, by what, from which batches (`perfledger versions`, `diff --from`)."""

from __future__ import annotations

from datetime import UTC, datetime

from perfledger.warehouse.store import Warehouse, WarehouseError


def locate(wh: Warehouse, table: str) -> bool:
    """Whether `table` names a curated table (else an auxiliary one); WarehouseError when neither exists."""
    if table in wh.curated_tables():
        return True
    if wh.has_table(table):
        return False
    raise WarehouseError(f"no table {table!r} in warehouse {wh.root} (curated: {', '.join(wh.curated_tables()) or 'none'})")


def table_versions(wh: Warehouse, table: str) -> list[dict]:
    """Oldest first: version, timestamp (UTC, ISO), operation, the batches it wrote (ingest commits say
    which), rows added/removed where Delta counted them."""
    out = []
    for entry in reversed(wh.table_history(table, curated=locate(wh, table))):
        metrics = entry.get("metrics") or {}
        stamp = entry.get("timestamp")
        batches = entry["labels"].get("batches")
        out.append({
            "version": entry["version"],
            "timestamp": datetime.fromtimestamp(stamp / 1000, UTC).isoformat(timespec="milliseconds") if stamp else None,
            "operation": entry["labels"].get("operation") or (entry.get("operation") or "").lower(),
            "delta_operation": entry.get("operation"),
            "batches": batches.split(",") if batches else [],
            "rows_added": metrics.get("num_added_rows"), "rows_removed": metrics.get("num_deleted_rows"),
        })
    return out


def check_version(wh: Warehouse, table: str, version: int) -> None:
    """WarehouseError naming the valid range when `version` is not one the table's log holds."""
    versions = [v["version"] for v in table_versions(wh, table)]
    if version not in versions:
        raise WarehouseError(f"{table}: no version {version}; valid versions are {min(versions)}..{max(versions)} "
                             f"(perfledger versions {table} lists them)")
