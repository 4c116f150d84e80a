"""Cross-backend fill: rows another framework collected under a kernel the reuse manifest shares with ours.

The public loader's fourth source channel (after own version, reuse.yaml donors and earlier versions): for a
table, every other framework that a `shared` / `shared_fallback` group of `perf_data_reuse_manifest.yaml`
lists together with the active backend lends its rows of that group's kernel_source, its versions newest
first, own rows winning on key conflict. `absence_load_bearing` groups lend nothing (routing depends on
those rows being absent). This is why 0.12.0 prices sglang 0.5.14's KDA short conv from vLLM rows.
The manifest is data: the wheel's copy beside its perf tree, else ../shared/aic/catalogs.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

from estimator.sources import PerfSource, TreeSource, first_wins, table_info
from estimator.specs import REPO_ROOT
from estimator.versions import version_key

MANIFEST = "perf_data_reuse_manifest.yaml"
SHARED_MANIFEST = REPO_ROOT / ".." / "shared" / "aic" / "catalogs" / MANIFEST
LENDING_TIERS = ("shared", "shared_fallback")


def manifest_path(source: PerfSource) -> Path:
    """The manifest that belongs to the source's tree (`<systems>/data` → `<systems>/MANIFEST`), else ../shared's."""
    if isinstance(source, TreeSource) and (source.root.parent / MANIFEST).is_file():
        return source.root.parent / MANIFEST
    return SHARED_MANIFEST


@lru_cache(maxsize=None)
def load_manifest(path: Path) -> tuple[dict, ...]:
    """The manifest's groups; a malformed file is an error naming it and the bad group."""
    doc = yaml.safe_load(Path(path).read_text()) or {}
    groups = doc.get("groups")
    if not isinstance(groups, list):
        raise ValueError(f"{path}: top-level 'groups' must be a list")
    for i, g in enumerate(groups):
        missing = [k for k in ("op_file", "kernel_source", "tier", "frameworks") if k not in (g or {})]
        if missing:
            raise ValueError(f"{path}: groups[{i}] lacks {', '.join(missing)}")
    return tuple(groups)


def lenders(groups: tuple[dict, ...], table: str, backend: str) -> dict[str, set[str]]:
    """other framework -> kernel_sources it lends `backend` for `table` (sorted by framework name)."""
    out: dict[str, set[str]] = {}
    for g in groups:
        if g["op_file"] != f"{table}.parquet" or g["tier"] not in LENDING_TIERS or backend not in g["frameworks"]:
            continue
        for fw in g["frameworks"]:
            if fw != backend:
                out.setdefault(fw, set()).add(str(g["kernel_source"]))
    return dict(sorted(out.items()))


def with_cross_backend(source: PerfSource, own, system: str, backend: str, table: str):
    """`own` (resolved rows, possibly empty) followed by the lenders' rows, first key wins."""
    import polars as pl

    family = table_info(table)["family"]
    frames = [own] if own.height else []
    rank = 1000  # after every own-backend rank
    for fw, kernels in lenders(load_manifest(manifest_path(source)), table, backend).items():
        known = [v for v in source.versions(system, family, fw) if version_key(v)[0] == 0]
        for ver in sorted(known, key=version_key, reverse=True):
            rows = source.read(system, fw, ver, table)
            if rows.height and "kernel_source" in rows.columns:
                rows = rows.filter(pl.col("kernel_source").is_in(sorted(kernels)))
                if rows.height:
                    frames.append(rows.with_columns(pl.lit(rank).cast(pl.Int32).alias("_source_rank"),
                                                    pl.lit(f"{fw}/{ver}").alias("_source_version")))
                    rank += 1
    if not frames:
        return own
    return first_wins(pl.concat(frames, how="diagonal_relaxed"), table)
