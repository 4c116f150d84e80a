"""File-by-file comparison of a published tree with an export of it (the round-trip tests' yardstick)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

DATA_SUFFIXES = (".parquet", ".yaml", ".json")


def data_files(root: Path, folders: list[str] | None = None) -> set[str]:
    """Relative paths of the data files under a tree, or under some of its folders (placeholders such as
    .gitkeep are not data)."""
    bases = [root / f for f in folders] if folders else [root]
    return {str(p.relative_to(root)) for base in bases for p in base.rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES}


def same_file(a: Path, b: Path) -> str | None:
    """None when equal in content (Parquet: schema with metadata, rows in order, codec; others: bytes), else why."""
    if a.suffix != ".parquet":
        return None if a.read_bytes() == b.read_bytes() else "bytes differ"
    fa, fb = pq.ParquetFile(a), pq.ParquetFile(b)
    if not fa.schema_arrow.equals(fb.schema_arrow, check_metadata=True):
        return f"schema {fa.schema_arrow} != {fb.schema_arrow}"
    codec = [f.metadata.row_group(0).column(0).compression for f in (fa, fb)]
    if codec[0] != codec[1]:
        return f"codec {codec[0]} != {codec[1]}"
    if not fa.read().equals(fb.read()):
        return "rows differ"
    return None


def compare_trees(source: Path, exported: Path, folders: list[str] | None = None) -> tuple[int, dict[str, str]]:
    """(files in the source, {relative path: why it differs or is missing/extra}), over `folders` of both
    trees when given."""
    want, got = data_files(source, folders), data_files(exported, folders)
    problems = {p: "missing from export" for p in want - got} | {p: "not in source" for p in got - want}
    for rel in sorted(want & got):
        why = same_file(source / rel, exported / rel)
        if why:
            problems[rel] = why
    return len(want), problems
