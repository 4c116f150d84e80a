"""Export the curated warehouse in the public layout aiconfigurator-core loads.

`OUT/data/<system>/<family>/<backend>/<version>/<table>.parquet`, one per curated slice, with the
source's own columns (lineage dropped, the row's version restored, millisecond twins of microsecond
metrics dropped), a `collection_meta.yaml` whose `rows` equal the exported rows, and a `reuse.yaml`
where the warehouse holds reuse declarations. The tree is built beside OUT and renamed into place,
so OUT is either absent or complete.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import polars as pl
import yaml

from perfledger.schemas.catalog import load_catalog
from perfledger.warehouse.inventory import curated_inventory
from perfledger.warehouse.store import Warehouse

LINEAGE = ("system", "family", "backend", "batch_id", "source_file", "source_row", "ingested_at")


class ExportError(RuntimeError):
    """The export cannot be written (target not empty, warehouse empty, IO error)."""


def public_columns(frame: pl.DataFrame, table: str) -> pl.DataFrame:
    """Curated rows back to the source layout: descriptive, keys, metrics, then extra columns."""
    catalog = load_catalog()
    spec = catalog.table(table)
    twins = {m.removesuffix("_us") + "_ms" for m in spec.microsecond_metrics}
    frame = frame.drop([c for c in (*LINEAGE, *twins, "version") if c in frame.columns]).rename({"row_version": "version"})
    # The curated table's schema is the union over slices: a column this slice never had is all null.
    required = set(spec.required_columns) | (set() if spec.legacy_without_descriptive else set(catalog.descriptive))
    present = [c for c in frame.columns if c in required or frame[c].null_count() < frame.height]
    ordered = [c for c in (*catalog.descriptive, *spec.keys, *spec.metrics) if c in present]
    return frame.select(*ordered, *[c for c in present if c not in ordered])


def _meta(batches: pl.DataFrame, system: str, backend: str, version: str, tables: dict[str, dict]) -> dict:
    """collection_meta.yaml (schema 1) of one version folder: provenance, runtime, rows per table."""
    mine = batches.filter((pl.col("system") == system) & (pl.col("backend") == backend) & (pl.col("version") == version)) \
        if batches.height else batches
    provenance = next((p for p in (mine["meta_provenance"].to_list() if mine.height else []) if p), "collected")
    return {"schema_version": 1, "provenance": provenance, "runtime": {"framework": backend, "version": version},
            "tables": tables}


def _reuse(reuse: pl.DataFrame, key: tuple[str, str, str, str]) -> list[dict]:
    if not reuse.height:
        return []
    system, family, backend, version = key
    rows = reuse.filter((pl.col("system") == system) & (pl.col("family") == family)
                        & (pl.col("backend") == backend) & (pl.col("version") == version))
    return [{k: r[k] for k in ("table", "from_version", "reason", "approved_by")} for r in rows.iter_rows(named=True)]


def export_aic(wh: Warehouse, out: Path, *, systems: list[str] | None = None,
               progress: Callable[[int, int], None] | None = None) -> dict:
    """Write the export; returns {"out", "files", "rows", "folders"}. `progress(done, total)` after each table file."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ExportError(f"{out}: output folder exists and is not empty")
    held = curated_inventory(wh)
    inventory = [e for e in held if not systems or e["system"] in systems]
    if not inventory:
        known = sorted({e["system"] for e in held})
        raise ExportError(f"warehouse {wh.root} holds no curated rows{' for ' + ', '.join(systems) if systems else ''}"
                          + (f" (systems it holds: {', '.join(known)})" if known else ""))
    batches = wh.read_table("batches") if wh.has_table("batches") else pl.DataFrame()
    reuse = wh.read_table("reuse") if wh.has_table("reuse") else pl.DataFrame()
    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    folders: dict[tuple[str, str, str, str], dict[str, dict]] = {}
    rows = 0
    try:
        for done, e in enumerate(inventory, 1):
            frame = wh.read_curated(e["table"], system=e["system"], backend=e["backend"], version=e["version"])
            key = (e["system"], e["family"], e["backend"], e["version"])
            folder = staging / "data" / Path(*key)
            folder.mkdir(parents=True, exist_ok=True)
            public_columns(frame, e["table"]).write_parquet(folder / f"{e['table']}.parquet")
            folders.setdefault(key, {})[e["table"]] = {"status": "complete", "rows": frame.height}
            rows += frame.height
            if progress:
                progress(done, len(inventory))
        for key, tables in folders.items():
            folder = staging / "data" / Path(*key)
            meta = _meta(batches, key[0], key[2], key[3], dict(sorted(tables.items())))
            (folder / "collection_meta.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
            entries = _reuse(reuse, key)
            if entries:
                (folder / "reuse.yaml").write_text(yaml.safe_dump({"schema_version": 1, "reuse": entries}, sort_keys=False))
        if out.exists():
            out.rmdir()
        staging.rename(out)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ExportError(f"cannot write export to {out}: {exc}") from exc
    return {"out": str(out), "files": len(inventory), "rows": rows, "folders": len(folders)}
