"""Read a support matrix (CSV-per-system directory or one CSV) into one validated frame."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import polars as pl

from perfledger.ledger.matrix.rules import MatrixRules, load_rules


class MatrixFormatError(ValueError):
    """A matrix file that cannot be imported; the message names file, line and column."""


def matrix_files(path: Path) -> list[Path]:
    """The CSVs of a matrix: `index.json` order first, then unlisted CSVs by name."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise MatrixFormatError(f"{path}: no such support-matrix directory or CSV")
    found = {p.name: p for p in sorted(path.glob("*.csv"))}
    index = path / "index.json"
    listed = json.loads(index.read_text()).get("files", []) if index.exists() else []
    ordered = [found.pop(name) for name in listed if name in found]
    files = ordered + list(found.values())
    if not files:
        raise MatrixFormatError(f"{path}: no *.csv support-matrix files")
    return files


def _upgrade(values: dict[str, str], rules: MatrixRules, where: str) -> dict[str, str | None]:
    """Bring a legacy 8/9-column row to the 10-column schema."""
    if "Command" not in values:
        values["Command"] = None
    if "Source" not in values:
        if values["Status"] == "HYBRID_PASS":
            raise MatrixFormatError(f"{where}: column Source: HYBRID_PASS needs the 10-column header (tier unknown)")
        values["Source"] = rules.legacy_pass_source if values["Status"] == "PASS" else ""
    return values


def _check(values: dict[str, str | None], rules: MatrixRules, where: str, stem: str | None) -> None:
    if values["Status"] not in rules.statuses:
        raise MatrixFormatError(f"{where}: column Status: unknown status {values['Status']!r} (allowed: {', '.join(rules.statuses)})")
    if values["Mode"] not in rules.modes:
        raise MatrixFormatError(f"{where}: column Mode: unknown mode {values['Mode']!r} (allowed: {', '.join(rules.modes)})")
    source = values["Source"] or ""
    if source and source not in rules.source_tiers:
        raise MatrixFormatError(f"{where}: column Source: unknown tier {source!r}")
    if stem is not None and values["System"] != stem:
        raise MatrixFormatError(f"{where}: column System: {values['System']!r} in a file named for {stem!r}")


def read_matrix_file(path: Path, *, rules: MatrixRules | None = None, one_system: bool = True) -> list[dict]:
    """Rows of one CSV as dicts (10 columns + source_file, source_line); raises on any bad row."""
    rules = rules or load_rules()
    headers = rules.headers()
    rows: list[dict] = []
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = tuple(next(reader, ()))
        if header not in headers:
            raise MatrixFormatError(
                f"{path}:1: header {','.join(header) or '(empty)'} is not one of the accepted "
                f"{sorted(headers.values())}-column support-matrix headers"
            )
        width = headers[header]
        line = reader.line_num + 1
        for fields in reader:
            where = f"{path}:{line}"
            if len(fields) != width:
                raise MatrixFormatError(f"{where}: expected {width} fields, found {len(fields)}")
            values = _upgrade(dict(zip(header, fields, strict=True)), rules, where)
            _check(values, rules, where, path.stem if one_system else None)
            rows.append({**values, "source_file": path.name, "source_line": line})
            line = reader.line_num + 1
    return rows


def check_unique_keys(rows: list[dict], key: tuple[str, ...]) -> None:
    """Reject a second row with the same key, naming both places."""
    seen: dict[tuple, str] = {}
    for row in rows:
        k = tuple(row[c] for c in key)
        here = f"{row['source_file']}:{row['source_line']}"
        if k in seen:
            raise MatrixFormatError(f"{here}: duplicate key {'|'.join(k)} (first at {seen[k]}; key = {', '.join(key)})")
        seen[k] = here


def read_matrix(path: Path, *, rules: MatrixRules | None = None) -> pl.DataFrame:
    """All rows of a matrix as a frame with the 10 columns, `source_file` and `source_line`."""
    rules = rules or load_rules()
    path = Path(path)
    rows: list[dict] = []
    for file in matrix_files(path):
        rows.extend(read_matrix_file(file, rules=rules, one_system=path.is_dir()))
    if not rows:
        raise MatrixFormatError(f"{path}: the support matrix has no data rows")
    check_unique_keys(rows, rules.key)
    schema = {c: pl.String for c in rules.columns} | {"source_file": pl.String, "source_line": pl.Int64}
    return pl.DataFrame(rows, schema=schema)
