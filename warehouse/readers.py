"""Read one source file into a raw frame: Parquet as stored, staging CSV as strings with line numbers.

Only regular files are read. Raises `SourceFileError` (file[:line[:column]]: reason) for input that
cannot be parsed at all; lines that cannot be split into the header's fields (wrong field count, a
stray carriage return, a field over the size limit) come back as row-level rejects instead.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from perfledger.safe_io import InputFileError, check_regular_file, decode_utf8, quoted, read_bytes

ROW_INDEX = "__row__"
CELL_TEXT_LIMIT = 4096
_UNSUPPORTED = (pl.List, pl.Array, pl.Struct, pl.Binary, pl.Object)


class SourceFileError(InputFileError):
    """A whole source file is unusable; the message names the file (and line and column where one applies)."""


@dataclass
class RawFile:
    """A file's rows before normalisation: `frame` has a `__row__` column (Parquet row index or CSV
    line number); `rejects` holds lines that could not be split into the header's fields, each with
    the line's text as read (`text`, cut at CELL_TEXT_LIMIT)."""

    frame: pl.DataFrame
    rejects: list[dict]
    kind: str


def cell_text(text: str) -> str:
    """Input text as stored beside a finding: whole up to CELL_TEXT_LIMIT, cut with its length noted beyond."""
    return text if len(text) <= CELL_TEXT_LIMIT else f"{text[:CELL_TEXT_LIMIT]}... ({len(text):,} chars)"


def read_parquet(path: Path, data: bytes | None = None) -> RawFile:
    """A Parquet file as stored; `data`: its bytes when already read (the file is then not opened)."""
    if data is None:
        check_regular_file(path)
    try:
        frame = pl.read_parquet(path if data is None else io.BytesIO(data))
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise SourceFileError(path, f"corrupt or unreadable Parquet file ({str(exc).splitlines()[0]})") from None
    if frame.height == 0:
        raise SourceFileError(path, "empty file: no rows")
    nested = [f"{name} ({dtype})" for name, dtype in frame.schema.items() if isinstance(dtype, _UNSUPPORTED)]
    if nested:
        raise SourceFileError(path, f"column(s) {quoted(nested)} hold lists, structs or binary values; "
                                    "perf tables hold one number or label per cell")
    if ROW_INDEX in frame.columns:
        raise SourceFileError(path, f"column {ROW_INDEX!r} is reserved for the reader")
    return RawFile(frame.with_row_index(ROW_INDEX).with_columns(pl.col(ROW_INDEX).cast(pl.Int64)), [], "parquet")


def _lines(text: str) -> list[str]:
    """The file's lines: split at LF (a CR before it belongs to the line end), or at CR in a CR-only file.
    A CR left inside a line is a stray one; the CSV parser rejects that line."""
    if "\n" not in text:
        return text.split("\r")
    return [line.removesuffix("\r") for line in text.split("\n")]


def _records(lines: list[str], rejects: list[dict]) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) per CSV record; a record the csv module refuses becomes a reject and
    parsing goes on at the next line."""
    source = iter(line + "\n" for line in lines)
    consumed = 0
    while True:
        reader = csv.reader(source)
        try:
            for fields in reader:
                yield consumed + reader.line_num, fields
            return
        except csv.Error as exc:
            consumed += reader.line_num
            check = "field_too_long" if "field limit" in str(exc) else "csv_syntax"
            rejects.append({"line": consumed, "check": check, "column": None, "value": str(exc),
                            "text": cell_text(lines[consumed - 1])})


def _header_like(fields: list[str], names: set[str]) -> bool:
    """A line naming more than half of the header's columns is a header (in any order), not data."""
    return len({f.strip() for f in fields} & names) * 2 > len(names)


def _check_header(path: Path, fields: list[str], line: int) -> list[str]:
    header = [f.strip() for f in fields]
    repeated = sorted(name for name, times in Counter(header).items() if times > 1 and name)
    if repeated or not all(header) or not header:
        detail = f" ({quoted(repeated)} repeated)" if repeated else ""
        raise SourceFileError(path, f"bad header {quoted(header)}: blank or repeated column names{detail}", line=line)
    return header


def read_staging_csv(path: Path, data: bytes | None = None) -> RawFile:
    """Parse a collector staging CSV, mapping columns by name.

    A UTF-8 byte-order mark is dropped; LF, CRLF and CR-only line ends are read alike. A repeated
    header with the same columns in any order (appended runs, column order drift) re-maps the rows
    after it; a header with other or repeated columns fails the file, naming the line. `data`: the
    file's bytes when already read (the file is then not opened).
    """
    text = decode_utf8(read_bytes(path) if data is None else data, path)
    if not text.strip():
        raise SourceFileError(path, "empty file: no header and no rows")
    lines = _lines(text)
    rejects: list[dict] = []
    records = _records(lines, rejects)
    first_line, first = next(records, (1, []))
    if rejects:
        raise SourceFileError(path, f"unreadable header ({rejects[0]['value']})", line=rejects[0]["line"])
    header = _check_header(path, first, first_line)
    names = set(header)
    columns: dict[str, list] = {h: [] for h in header}
    row_lines: list[int] = []
    active = header
    for line, fields in records:
        if not fields or all(not f.strip() for f in fields):
            continue
        if _header_like(fields, names):
            renamed = _check_header(path, fields, line)
            if set(renamed) != names:
                added, removed = sorted(set(renamed) - names), sorted(names - set(renamed))
                raise SourceFileError(path, f"header changes mid-file (added {quoted(added)}, removed {quoted(removed)})",
                                      line=line)
            active = renamed
            continue
        if len(fields) != len(active):
            joined = ",".join(fields)
            rejects.append({"line": line, "check": "field_count", "column": None,
                            "value": f"{len(fields)} fields, header has {len(active)}", "text": cell_text(joined)})
            continue
        for name, value in zip(active, fields, strict=True):
            columns[name].append(value.strip() if value.strip() != "" else None)
        row_lines.append(line)
    frame = pl.DataFrame({ROW_INDEX: pl.Series(row_lines, dtype=pl.Int64),
                          **{h: pl.Series(v, dtype=pl.String) for h, v in columns.items()}})
    if frame.is_empty() and not rejects:
        raise SourceFileError(path, "empty file: a header but no rows")
    return RawFile(frame, sorted(rejects, key=lambda r: r["line"]), "csv")


def read_source_file(path: Path, data: bytes | None = None) -> RawFile:
    """One source file by its suffix; `data`: its bytes when read elsewhere (shipped to a worker)."""
    if path.suffix == ".parquet":
        return read_parquet(path, data)
    if path.suffix == ".txt" or path.suffix == ".csv":
        return read_staging_csv(path, data)
    raise SourceFileError(path, "unsupported file type (expected .parquet or staging .txt/.csv)")
