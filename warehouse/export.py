"""Export the curated warehouse in the public layout aiconfigurator-core loads: a faithful republish.

`OUT/data/<system>/<family>/<backend>/<version>/<table>.parquet`, one per curated slice. A slice whose
source file's layout was recorded at ingest (warehouse.layout) is written back as that file: its
curated and repeated rows in source order, its columns, labels, Arrow types, schema metadata and codec.
A tree batch's sidecars (collection_meta.yaml, reuse.yaml, errors_*.json) are written as received, so a
version folder that only declares reuse comes back too; collection_meta.yaml is generated instead
(schema 1, `rows` = exported rows) where the folder's tables no longer are exactly what that batch
delivered. Slices without a recorded layout (ingested before layouts were kept) get the source columns
in catalog order. `OUT/<system>.yaml` and the shared files the loader reads sit beside `data/`. The tree
is built beside OUT and renamed into place, so OUT is either absent or complete.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import yaml

from perfledger import settings
from perfledger.schemas.catalog import load_catalog
from perfledger.warehouse.commit import SIDECAR_TABLE
from perfledger.warehouse.inventory import curated_inventory
from perfledger.warehouse.layout import LAYOUT_TABLE, restore
from perfledger.warehouse.normalise import LINEAGE_COLUMNS, RENAMED_SUFFIX
from perfledger.warehouse.store import Warehouse

META = "collection_meta.yaml"
REUSE = "reuse.yaml"
LOADER_FILES = ("attention_lane_defaults.yaml", "query_versions.yaml")  # read from the systems root by the loader
REPEAT_COLUMNS = ("table", "kept_source_row", "kept_value", "spread_rel")
Folder = tuple[str, str, str, str]  # system, family, backend, version


class ExportError(RuntimeError):
    """The export cannot be written (target not empty, warehouse empty, IO error)."""


def public_columns(frame: pl.DataFrame, table: str) -> pl.DataFrame:
    """Curated rows back to the source layout: descriptive, keys, metrics, then extra columns."""
    catalog = load_catalog()
    spec = catalog.table(table)
    twins = {m.removesuffix("_us") + "_ms" for m in spec.microsecond_metrics}
    frame = frame.drop([c for c in (*LINEAGE_COLUMNS, *twins, "version") if c in frame.columns]) \
        .rename({"row_version": "version"})
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
            "tables": {name: {"status": "complete", "rows": entry["rows"]} for name, entry in sorted(tables.items())}}


def _reuse(reuse: pl.DataFrame, key: Folder) -> list[dict]:
    if not reuse.height:
        return []
    system, family, backend, version = key
    rows = reuse.filter((pl.col("system") == system) & (pl.col("family") == family)
                        & (pl.col("backend") == backend) & (pl.col("version") == version))
    return [{k: r[k] for k in ("table", "from_version", "reason", "approved_by")} for r in rows.iter_rows(named=True)]


def _optional(wh: Warehouse, name: str) -> pl.DataFrame:
    return wh.read_table(name) if wh.has_table(name) else pl.DataFrame()


class _Exporter:
    """One export run: the warehouse's layouts and sidecars read once, files written under `staging`."""

    def __init__(self, wh: Warehouse, staging: Path):
        self.wh, self.staging, self.catalog = wh, staging, load_catalog()
        layouts = _optional(wh, LAYOUT_TABLE)
        self.layouts = {(r["table"], r["system"], r["backend"], r["version"]): r for r in layouts.iter_rows(named=True)}
        self.sidecars: dict[Folder, dict[str, tuple[str, bytes]]] = {}
        for r in _optional(wh, SIDECAR_TABLE).iter_rows(named=True):
            folder = (r["system"], r["family"], r["backend"], r["version"])
            self.sidecars.setdefault(folder, {})[r["name"]] = (r["batch_id"], r["content"])
        self.has_repeats = wh.has_table("duplicates")

    def folder(self, key: Folder) -> Path:
        path = self.staging / "data" / Path(*key)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def table_file(self, entry: dict) -> dict:
        """Write one curated slice; returns its rows, batch and whether it is the source file exactly."""
        table, system, backend, version = entry["table"], entry["system"], entry["backend"], entry["version"]
        frame = self.wh.read_curated(table, system=system, backend=backend, version=version)
        target = self.folder((system, entry["family"], backend, version)) / f"{table}.parquet"
        layout = self.layouts.get((table, system, backend, version))
        batch_ids = set(frame["batch_id"].unique().to_list())
        if layout is None or batch_ids != {layout["batch_id"]}:
            public_columns(frame, table).write_parquet(target)
            return {"rows": frame.height, "batch_id": None, "exact": False}
        if self.has_repeats:
            repeats = self.wh.read_table("duplicates", where={"table": table, "system": system, "backend": backend,
                                                               "version": version})
            repeats = repeats.filter(pl.col("batch_id") == layout["batch_id"])
            if repeats.height:
                frame = pl.concat([frame, repeats.drop([c for c in REPEAT_COLUMNS if c in repeats.columns])],
                                  how="diagonal_relaxed")
        restored = restore(frame, layout, self.catalog.table(table), RENAMED_SUFFIX)
        pq.write_table(restored, target, compression=layout["compression"] or "zstd",
                       row_group_size=max(restored.num_rows, 1))
        return {"rows": restored.num_rows, "batch_id": layout["batch_id"], "exact": restored.num_rows == layout["rows_in"]}

    def sidecar_files(self, key: Folder, tables: dict[str, dict], batches: pl.DataFrame, reuse: pl.DataFrame) -> int:
        """collection_meta.yaml, reuse.yaml and errors files of one version folder; returns how many were
        written as received."""
        folder = self.folder(key)
        received = self.sidecars.get(key, {})
        meta_batch = received.get(META, (None, b""))[0]
        verbatim = 0
        for name, (_, content) in received.items():
            if name == META and not all(t["exact"] and t["batch_id"] == meta_batch for t in tables.values()):
                continue
            (folder / name).write_bytes(content)
            verbatim += 1
        if META not in received or not (folder / META).exists():
            if tables:
                meta = _meta(batches, key[0], key[2], key[3], tables)
                (folder / META).write_text(yaml.safe_dump(meta, sort_keys=False))
        if REUSE not in received:
            entries = _reuse(reuse, key)
            if entries:
                (folder / REUSE).write_text(yaml.safe_dump({"schema_version": 1, "reuse": entries}, sort_keys=False))
        return verbatim

    def system_files(self, systems: set[str]) -> list[str]:
        """Each exported system's spec YAML and the shared files the loader reads, from where specs are found."""
        written = []
        for name in [*(f"{s}.yaml" for s in sorted(systems)), *LOADER_FILES]:
            found = next((d / name for d in settings.system_spec_dirs() if (d / name).is_file()), None)
            if found is not None:
                shutil.copyfile(found, self.staging / name)
                written.append(name)
        return written


def export_aic(wh: Warehouse, out: Path, *, systems: list[str] | None = None,
               progress: Callable[[int, int], None] | None = None) -> dict:
    """Write the export; returns {"out", "files", "rows", "folders", "exact_files", "sidecars_as_received", "systems"};
    `progress(done, total)` after each table file."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ExportError(f"{out}: output folder exists and is not empty")
    held = curated_inventory(wh)
    inventory = [e for e in held if not systems or e["system"] in systems]
    if not inventory:
        known = sorted({e["system"] for e in held})
        raise ExportError(f"warehouse {wh.root} holds no curated rows{' for ' + ', '.join(systems) if systems else ''}"
                          + (f" (systems it holds: {', '.join(known)})" if known else ""))
    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        exporter = _Exporter(wh, staging)
        folders: dict[Folder, dict[str, dict]] = {key: {} for key in exporter.sidecars if not systems or key[0] in systems}
        for done, e in enumerate(inventory, 1):
            folders.setdefault((e["system"], e["family"], e["backend"], e["version"]), {})[e["table"]] = exporter.table_file(e)
            if progress:
                progress(done, len(inventory))
        batches, reuse = _optional(wh, "batches"), _optional(wh, "reuse")
        verbatim = sum(exporter.sidecar_files(key, tables, batches, reuse) for key, tables in sorted(folders.items()))
        specs = exporter.system_files({key[0] for key in folders})
        if out.exists():
            out.rmdir()
        staging.rename(out)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ExportError(f"cannot write export to {out}: {exc}") from exc
    tables = [t for f in folders.values() for t in f.values()]
    return {"out": str(out), "files": len(inventory), "rows": sum(t["rows"] for t in tables), "folders": len(folders),
            "exact_files": sum(t["exact"] for t in tables), "sidecars_as_received": verbatim, "systems": specs}
