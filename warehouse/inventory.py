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


def filter_inventory(entries: list[dict], wanted: dict[str, list[str]]) -> list[dict]:
    """The entries whose column is one of the wanted values, per column given; a wanted value no entry has is a
    LookupError naming the values there are (close ones first), so a typo is never an empty listing."""
    import difflib

    for column, values in wanted.items():
        have = sorted({str(e[column]) for e in entries})
        unknown = [v for v in values if v not in have]
        if unknown:
            close = difflib.get_close_matches(unknown[0], have, n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise LookupError(f"no {column} {unknown[0]!r} in the warehouse{' here' if len(wanted) > 1 else ''}; "
                              f"{hint}known: {', '.join(have)}")
        entries = [e for e in entries if str(e[column]) in values]
    return entries


def table_totals(entries: list[dict]) -> list[dict]:
    """Per table (sorted by name): how many slices and rows an inventory lists."""
    totals: dict[str, dict] = {}
    for entry in entries:
        row = totals.setdefault(entry["table"], {"table": entry["table"], "slices": 0, "rows": 0})
        row["slices"] += 1
        row["rows"] += entry["rows"]
    return sorted(totals.values(), key=lambda r: r["table"])
