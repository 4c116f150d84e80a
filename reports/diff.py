"""Warehouse diff between two versions of a curated table: rows added, removed, changed, big moves.

The site shows what the latest ingest changed (`latest_diffs`, reading only the slices it touched);
`table_diff` compares any two versions of one table.

A row is identified by its slice (system/backend/version) plus the catalog key (op_name,
kernel_source and the table's shape keys); "changed" means any metric differs, and a "move" is a
primary-metric change larger than the threshold (5% by default).
"""

from __future__ import annotations

import polars as pl

from perfledger.reports.page import Page, Section, Table, fmt
from perfledger.warehouse.normalise import key_columns

SLICE = ["system", "backend", "version"]
MOVE_LIMIT = 200


def diff_frames(old: pl.DataFrame, new: pl.DataFrame, keys: list[str], metrics: list[str], primary: str,
                threshold: float = 0.05) -> dict:
    """Pure: counts plus the rows whose primary metric moved by more than `threshold` (relative)."""
    metrics = [m for m in metrics if m in old.columns and m in new.columns]
    a = old.select(*keys, *metrics).unique(subset=keys, keep="first")
    b = new.select(*keys, *metrics).unique(subset=keys, keep="first")
    added = b.join(a, on=keys, how="anti", nulls_equal=True)
    removed = a.join(b, on=keys, how="anti", nulls_equal=True)
    both = a.join(b, on=keys, how="inner", suffix="_new", nulls_equal=True)
    differs = pl.any_horizontal([pl.col(m).ne_missing(pl.col(f"{m}_new")) for m in metrics]) if metrics else pl.lit(False)
    changed = both.filter(differs)
    rel = ((pl.col(f"{primary}_new") - pl.col(primary)).abs() / pl.col(primary).abs()).alias("move")
    moves = changed.with_columns(rel).filter(pl.col("move") > threshold).sort("move", descending=True)
    return {"added": added.height, "removed": removed.height, "changed": changed.height, "moves": moves,
            "added_slices": _slices(added), "removed_slices": _slices(removed)}


def _slices(frame: pl.DataFrame) -> dict[str, int]:
    cols = [c for c in SLICE if c in frame.columns]
    if not frame.height or not cols:
        return {}
    return {"/".join(k): n for *k, n in frame.group_by(cols).len().sort(cols).iter_rows()}


def table_diff(wh, table: str, old_version: int, new_version: int, threshold: float = 0.05) -> dict:
    """Diff two versions of one curated table of the warehouse."""
    from perfledger.schemas.catalog import load_catalog

    catalog = load_catalog()
    spec = catalog.table(table)
    keys = [*SLICE, *key_columns(spec, catalog)]
    old = wh.read_curated(table, as_of=old_version)
    new = wh.read_curated(table, as_of=new_version)
    result = diff_frames(old, new, keys, list(spec.metrics), spec.primary_metric, threshold)
    return {"table": table, "from": old_version, "to": new_version, "keys": keys, "primary": spec.primary_metric, **result}


def _slice_frame(wh, table: str, slices: list[tuple[str, str, str]], as_of) -> pl.DataFrame:
    """The union of some slices of a curated table (now, or as of a timestamp; empty when absent then)."""
    parts = []
    for system, backend, version in slices:
        try:
            parts.append(wh.read_curated(table, system=system, backend=backend, version=version, as_of=as_of))
        except Exception:  # noqa: BLE001 -- the table did not exist yet at as_of
            continue
    parts = [p for p in parts if p.height]
    return pl.concat(parts, how="diagonal_relaxed") if parts else pl.DataFrame()


def previous_as_of(wh) -> str | None:
    """The timestamp of the previous `batches` version (the warehouse before the latest ingest)."""
    from perfledger.ledger.source import resolve_as_of

    version = wh.table_version("batches")
    if not version:
        return None
    return resolve_as_of(wh, str(version - 1))


def latest_diffs(wh, threshold: float = 0.05) -> list[dict]:
    """What the latest ingest changed: the slices its batches wrote, before it (Delta time travel) vs now.

    Only touched slices are read, so the cost follows the size of the change, not of the warehouse.
    """
    from perfledger.ledger.source import read_or_empty
    from perfledger.schemas.catalog import load_catalog

    stamp = previous_as_of(wh)
    if stamp is None:
        return []  # the first ingest: everything is new (the index lists the counts)
    before = set(read_or_empty(wh, "batches", as_of=stamp)["batch_id"].to_list())
    new_ids = [b for b in read_or_empty(wh, "batches")["batch_id"].to_list() if b not in before]
    touched = read_or_empty(wh, "batch_tables").filter(pl.col("batch_id").is_in(new_ids))
    catalog = load_catalog()
    out = []
    for (table,), part in touched.group_by("table", maintain_order=True):
        slices = sorted(set(part.select("system", "backend", "version").iter_rows()))
        spec = catalog.table(table)
        keys = [*SLICE, *key_columns(spec, catalog)]
        old, new = _slice_frame(wh, table, slices, stamp), _slice_frame(wh, table, slices, None)
        if not old.height:
            old = new.clear()
        result = diff_frames(old, new, keys, list(spec.metrics), spec.primary_metric, threshold)
        out.append({"table": table, "from": f"before {stamp}", "to": "now", "keys": keys,
                    "primary": spec.primary_metric, **result})
    return sorted(out, key=lambda d: d["table"])


def diff_page(diffs: list[dict], threshold: float = 0.05) -> Page:
    summary_rows = [[d["table"], d["from"], d["to"], d["added"], d["removed"], d["changed"], d["moves"].height]
                    for d in diffs]
    sections = [Section("Tables changed by the latest ingest",
                        text=[] if diffs else ["Nothing to compare: the warehouse holds a single ingest (or none)."],
                        table=Table(["table", "from", "to", "rows added", "rows removed",
                                     "rows changed", f"moves > {threshold:.0%}"], summary_rows) if diffs else None)]
    for d in diffs:
        slices = [[s, n, "added"] for s, n in d["added_slices"].items()] + \
                 [[s, n, "removed"] for s, n in d["removed_slices"].items()]
        moves = d["moves"].head(MOVE_LIMIT)
        cols = [k for k in d["keys"] if k in moves.columns]
        note = f"first {fmt(MOVE_LIMIT)} of {fmt(d['moves'].height)}" if d["moves"].height > MOVE_LIMIT else ""
        sections.append(Section(
            f"{d['table']}: {d['from']} → {d['to']}",
            text=[f"{fmt(d['added'])} added, {fmt(d['removed'])} removed, {fmt(d['changed'])} changed; "
                  f"{fmt(d['moves'].height)} rows moved more than {threshold:.0%} in {d['primary']}."],
            tabs=[(f"{d['table']} slices", Table(["slice", "rows", "kind"], slices)),
                  (f"{d['table']} moves", Table([*cols, d["primary"], f"{d['primary']} new", "move"],
                                  [[*(r[c] for c in cols), r[d["primary"]], r[f"{d['primary']}_new"], f"{r['move']:.1%}"]
                                   for r in moves.iter_rows(named=True)], filterable=True,
                                  note=note))]
            if slices or moves.height else []))
    return Page("diff", "Warehouse diff", sections,
                summary=f"{len(diffs)} tables changed by the latest ingest; "
                        f"{fmt(sum(d['added'] for d in diffs))} rows added, "
                        f"{fmt(sum(d['removed'] for d in diffs))} removed, "
                        f"{fmt(sum(d['changed'] for d in diffs))} changed")
