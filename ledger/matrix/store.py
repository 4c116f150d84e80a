"""Labelled support-matrix snapshots in the warehouse's `support_matrix` Delta table."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from perfledger.ledger.matrix.reader import read_matrix
from perfledger.ledger.source import MATRIX_TABLE, now_iso, read_or_empty

BUILT_SOURCE = "perfledger matrix build"  # snapshot_source of matrices we built ourselves


class SnapshotError(LookupError):
    """No stored snapshot under that label (or none at all)."""


def store_snapshot(wh, frame: pl.DataFrame, label: str, source: str) -> int:
    """Make `frame` the whole content of `label` (re-importing a label replaces it) in one commit."""
    if not label.strip():
        raise SnapshotError("--label: empty label")
    rows = frame.with_columns(label=pl.lit(label), snapshot_source=pl.lit(source), imported_at=pl.lit(now_iso()))
    return wh.replace_slices(wh.table_uri(MATRIX_TABLE), rows, ["label"], [(label,)])


def labels(wh) -> pl.DataFrame:
    """label, rows, imported_at, snapshot_source per stored snapshot, oldest first."""
    table = read_or_empty(wh, MATRIX_TABLE)
    if not table.height:
        return pl.DataFrame(schema={"label": pl.String, "rows": pl.UInt32, "imported_at": pl.String,
                                    "snapshot_source": pl.String})
    return table.group_by("label").agg(rows=pl.len(), imported_at=pl.col("imported_at").max(),
                                       snapshot_source=pl.col("snapshot_source").first()).sort("imported_at")


def read_snapshot(wh, label: str | None = None) -> tuple[str, pl.DataFrame]:
    """(label, rows) of a stored snapshot; the most recently imported one when label is None."""
    known = labels(wh)
    if not known.height:
        raise SnapshotError("no support-matrix snapshot stored; run `perfledger matrix import DIR --label L` first")
    if label is None:
        imported = known.filter(pl.col("snapshot_source") != BUILT_SOURCE)
        label = (imported if imported.height else known)["label"][-1]
    elif label not in known["label"].to_list():
        raise SnapshotError(f"no support-matrix snapshot labelled {label!r} (stored: {', '.join(known['label'])})")
    table = read_or_empty(wh, MATRIX_TABLE)
    return label, table.filter(pl.col("label") == label).sort(["source_file", "source_line"])


def resolve(wh, ref: str) -> tuple[str, pl.DataFrame]:
    """A compare operand: a stored label, else an existing directory/CSV read directly, else an unknown label
    (a label wins over a same-named path: `perfledger`, our built matrix, is also the package directory)."""
    path = Path(ref)
    if ref not in labels(wh)["label"].to_list() and path.exists():
        return str(path), read_matrix(path)
    return read_snapshot(wh, ref)
