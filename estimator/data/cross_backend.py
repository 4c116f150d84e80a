"""Cross-backend channel: rows another framework collected under a kernel the reuse manifest shares with ours.

The public loader's fourth source channel, after own version, reuse.yaml donors and earlier versions: for a
table, every other framework that a `shared` / `shared_fallback` group of `perf_data_reuse_manifest.yaml`
lists together with the active backend lends its rows of that group's kernel_source (frameworks by name,
each one's versions newest first), the active backend's rows winning on key conflict. `absence_load_bearing`
groups lend nothing (routing depends on those rows being absent). 0.12.0 applies it wherever its shared layer
is on (SILICON and HYBRID, not EMPIRICAL/SOL), i.e. to every table; only groups naming several frameworks
change answers (DSA/MLA module `default` rows trtllm → vLLM, KDA short conv vLLM → sglang, mla_bmm, gdn).
`sources.PerfSource.resolve` calls `lent_frames`; the manifest is data: beside the source's perf tree (the
wheel's systems/) or beside the warehouse, else the reference data's catalogs (`settings.reference_catalogs_dir()`),
else the installed wheel's systems/ copy.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from perfledger import settings
from perfledger.safe_io import data_yaml
from perfledger.versions import is_version, version_key

MANIFEST = "perf_data_reuse_manifest.yaml"
LENDING_TIERS = ("shared", "shared_fallback")
LENDER_RANK = 1000  # lent rows rank after every own-backend source


def manifest_path(source) -> Path | None:
    """The manifest that sits with the source's data (`PerfSource.manifest_dir()`), else the reference data's
    catalog copy, else the installed wheel's; None when there is none (nothing is lent)."""
    wheel = settings.aic_package_dir()
    for folder in (source.manifest_dir(), settings.reference_catalogs_dir(), wheel / "systems" if wheel else None):
        if folder is not None and (Path(folder) / MANIFEST).is_file():
            return Path(folder) / MANIFEST
    return None


@cache
def load_manifest(path: Path) -> tuple[dict, ...]:
    """The manifest's groups; a malformed file is an error naming it and the bad group."""
    doc = data_yaml(path) or {}  # libyaml: ~10x faster on the 1,700-line manifest
    groups = doc.get("groups")
    if not isinstance(groups, list):
        raise ValueError(f"{path}: top-level 'groups' must be a list")
    for i, g in enumerate(groups):
        missing = [k for k in ("op_file", "kernel_source", "tier", "frameworks") if k not in (g or {})]
        if missing:
            raise ValueError(f"{path}: groups[{i}] lacks {', '.join(missing)}")
    return tuple(groups)


def lender_index(groups: tuple[dict, ...]) -> dict[tuple[str, str], dict[str, frozenset[str]]]:
    """(table, borrowing backend) -> {lending framework: kernel_sources}, frameworks sorted by name."""
    index: dict[tuple[str, str], dict[str, set[str]]] = {}
    for g in groups:
        if g["tier"] not in LENDING_TIERS:
            continue
        table = str(g["op_file"]).removesuffix(".parquet")
        for borrower in g["frameworks"]:
            for fw in g["frameworks"]:
                if fw != borrower:
                    index.setdefault((table, borrower), {}).setdefault(fw, set()).add(str(g["kernel_source"]))
    return {k: {fw: frozenset(v[fw]) for fw in sorted(v)} for k, v in index.items()}


def lenders(groups: tuple[dict, ...], table: str, backend: str) -> dict[str, set[str]]:
    """other framework -> kernel_sources it lends `backend` for `table` (sorted by framework name)."""
    return {fw: set(ks) for fw, ks in lender_index(groups).get((table, backend), {}).items()}


@cache
def _indexed(path: Path) -> dict[tuple[str, str], dict[str, frozenset[str]]]:
    return lender_index(load_manifest(path))


def lent_frames(source, system: str, backend: str, table: str, family: str) -> list:
    """The lenders' rows of `table` in priority order, tagged `_source_rank` (from LENDER_RANK up) and
    `_source_version` = "<framework>/<version>" (lineage); empty when the manifest lends nothing."""
    import polars as pl

    path = manifest_path(source)
    found = _indexed(path).get((table, backend), {}) if path is not None else {}
    frames, rank = [], LENDER_RANK
    for fw, kernels in found.items():
        known = [v for v in source.versions(system, family, fw) if is_version(v)]
        for ver in sorted(known, key=version_key, reverse=True):
            rows = source.read(system, fw, ver, table)
            if not rows.height or "kernel_source" not in rows.columns:
                continue
            rows = rows.filter(pl.col("kernel_source").is_in(sorted(kernels)))
            if rows.height:
                frames.append(rows.with_columns(pl.lit(rank).alias("_source_rank"),
                                                pl.lit(f"{fw}/{ver}").alias("_source_version")))
                rank += 1
    return frames
