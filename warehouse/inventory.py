"""What the warehouse holds: rows per curated table slice (reads only the slice columns)."""

from __future__ import annotations

from perfledger.warehouse.store import Warehouse

INVENTORY_COLUMNS = ["system", "family", "backend", "version"]


def curated_inventory(warehouse: Warehouse) -> list[dict]:
    """One entry per table × system × family × backend × version, with its curated row count."""
    entries: list[dict] = []
    for table in warehouse.curated_tables():
        frame = warehouse.read_curated_columns(table, INVENTORY_COLUMNS)
        counts = frame.group_by(INVENTORY_COLUMNS).len("rows").sort(INVENTORY_COLUMNS)
        entries.extend({"table": table, **row} for row in counts.iter_rows(named=True))
    return entries


def table_totals(entries: list[dict]) -> list[dict]:
    """Per table (sorted by name): how many slices and rows an inventory lists."""
    totals: dict[str, dict] = {}
    for entry in entries:
        row = totals.setdefault(entry["table"], {"table": entry["table"], "slices": 0, "rows": 0})
        row["slices"] += 1
        row["rows"] += entry["rows"]
    return sorted(totals.values(), key=lambda r: r["table"])
