"""Test helper: curated-like frames read straight from a public-layout tree (lineage columns added)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from perfledger import settings

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / ".." / "shared"
SHARED_DATA = SHARED / "aic" / "perfdb-095f58a" / "systems" / "data"
MATRIX_STATES = SHARED / "aic" / "support_matrix"


def wheel_systems() -> Path:
    return settings.aic_package_dir() / "systems"


def read_tree_table(root: Path, table: str, *, batch: str = "b0") -> pl.DataFrame:
    """Every `<system>/<family>/<backend>/<version>/<table>.parquet` under root, with lineage columns."""
    parts = []
    for path in sorted(root.glob(f"*/*/*/*/{table}.parquet")):
        system, family, backend, version = path.parts[-5:-1]
        df = pl.read_parquet(path)
        df = df.rename({"version": "row_version"}) if "version" in df.columns else df
        parts.append(df.with_columns(
            system=pl.lit(system), family=pl.lit(family), backend=pl.lit(backend), version=pl.lit(version),
            batch_id=pl.lit(f"{batch}:{system}/{backend}/{version}"), source_file=pl.lit(str(path)),
            source_row=pl.int_range(pl.len(), dtype=pl.Int64),
            ingested_at=pl.lit(datetime(2026, 12, 1, tzinfo=UTC)),
        ))
    return pl.concat(parts, how="diagonal_relaxed") if parts else pl.DataFrame()


def check_golden(text: str, golden: Path) -> None:
    """Compare a rendered artifact with its golden file (UPDATE_GOLDEN=1 rewrites the file first)."""
    import os

    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")
