"""Read a support matrix (CSV-per-system directory or one CSV) into one validated frame.

Input is read through perfledger.safe_io: only regular files inside the folder, UTF-8 (a bad byte is
named by line and column), a bounded `index.json` of the right shape, files and fields under size caps.
Every problem is a `MatrixFormatError` naming file[:line[:column]]; nothing is returned half-read.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from perfledger.ledger.matrix.rules import MatrixRules, load_rules
from perfledger.safe_io import InputFileError, check_regular_file, decode_utf8, load_json, quoted, read_bytes

MAX_FILE_BYTES = 64 * 1024 * 1024  # real matrix CSVs are about 2 MB
MAX_FIELD_CHARS = 65_536  # the longest real field (an ErrMsg traceback) is about 5,000 characters


class MatrixFormatError(ValueError):
    """A matrix file that cannot be imported; the message names file, line and column."""


def _index_names(index: Path) -> list[str]:
    """The file names `index.json` lists, in order; it must be `{"files": ["<name>.csv", ...]}`."""
    data = load_json(index)
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list) or not all(isinstance(name, str) for name in files):
        raise InputFileError(index, f'expected {{"files": [<CSV names>]}}, found {quoted(data)}')
    return files


def matrix_files(path: Path) -> list[Path]:
    """The CSVs of a matrix: `index.json` order first, then unlisted CSVs by name. Every one is a regular
    file inside the folder, and every name the index lists is there (else the import would be partial)."""
    if not path.exists():
        raise MatrixFormatError(f"{path}: no such support-matrix directory or CSV")
    try:
        if not path.is_dir():
            return [check_regular_file(path)]
        found = {p.name: check_regular_file(p, inside=path) for p in sorted(path.glob("*.csv"))}
        index = path / "index.json"
        listed = _index_names(check_regular_file(index, inside=path)) if index.exists() or index.is_symlink() else []
    except InputFileError as exc:
        raise MatrixFormatError(str(exc)) from None
    absent = [name for name in listed if name not in found]
    if absent:
        raise MatrixFormatError(f"{index}: lists {quoted(absent)}, not in {path}; the matrix would be incomplete")
    ordered = [found.pop(name) for name in dict.fromkeys(listed)]
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
        raise MatrixFormatError(f"{where}: column Status: unknown status {quoted(values['Status'])} "
                                f"(allowed: {', '.join(rules.statuses)})")
    if values["Mode"] not in rules.modes:
        raise MatrixFormatError(f"{where}: column Mode: unknown mode {quoted(values['Mode'])} "
                                f"(allowed: {', '.join(rules.modes)})")
    source = values["Source"] or ""
    if source and source not in rules.source_tiers:
        raise MatrixFormatError(f"{where}: column Source: unknown tier {quoted(source)}")
    if stem is not None and values["System"] != stem:
        raise MatrixFormatError(f"{where}: column System: {quoted(values['System'])} in a file named for {stem!r}")


def _records(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(first line, fields) per CSV record of a bounded UTF-8 file; a record the csv module refuses,
    or a field over MAX_FIELD_CHARS, is an error at its line."""
    try:
        text = decode_utf8(read_bytes(path, MAX_FILE_BYTES), path)
    except InputFileError as exc:
        raise MatrixFormatError(str(exc)) from None
    reader = csv.reader(io.StringIO(text, newline=""))
    line = 1
    try:
        for fields in reader:
            too_long = next((i for i, field in enumerate(fields) if len(field) > MAX_FIELD_CHARS), None)
            if too_long is not None:
                raise MatrixFormatError(f"{path}:{line}: field {too_long + 1} has {len(fields[too_long]):,} characters, "
                                        f"over the {MAX_FIELD_CHARS:,} limit")
            yield line, fields
            line = reader.line_num + 1
    except csv.Error as exc:
        reason = f"a field over the {MAX_FIELD_CHARS:,}-character limit" if "field limit" in str(exc) else f"not CSV ({exc})"
        raise MatrixFormatError(f"{path}:{reader.line_num}: {reason}") from None


def read_matrix_file(path: Path, *, rules: MatrixRules | None = None, one_system: bool = True) -> list[dict]:
    """Rows of one CSV as dicts (10 columns + source_file, source_line); raises on any bad row."""
    rules = rules or load_rules()
    headers = rules.headers()
    records = _records(path)
    header = tuple(next(records, (1, []))[1])
    if header not in headers:
        raise MatrixFormatError(f"{path}:1: header {quoted(','.join(header) or '(empty)')} is not one of the accepted "
                                f"{sorted(headers.values())}-column support-matrix headers")
    width = headers[header]
    rows: list[dict] = []
    for line, fields in records:
        where = f"{path}:{line}"
        if len(fields) != width:
            raise MatrixFormatError(f"{where}: expected {width} fields, found {len(fields)}")
        values = _upgrade(dict(zip(header, fields, strict=True)), rules, where)
        _check(values, rules, where, path.stem if one_system else None)
        rows.append({**values, "source_file": path.name, "source_line": line})
    return rows


def check_unique_keys(rows: list[dict], key: tuple[str, ...], folder: Path) -> None:
    """Reject a second row with the same key, naming both places (files of `folder`)."""
    seen: dict[tuple, str] = {}
    for row in rows:
        k = tuple(row[c] for c in key)
        here = f"{row['source_file']}:{row['source_line']}"
        if k in seen:
            raise MatrixFormatError(f"{folder / here}: duplicate key {quoted('|'.join(k))} (first at {seen[k]}; "
                                    f"key = {', '.join(key)})")
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
    check_unique_keys(rows, rules.key, path if path.is_dir() else path.parent)
    schema = {c: pl.String for c in rules.columns} | {"source_file": pl.String, "source_line": pl.Int64}
    return pl.DataFrame(rows, schema=schema)
