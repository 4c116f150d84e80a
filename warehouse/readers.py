"""Read one source file into a raw frame: Parquet as stored, staging CSV as strings with line numbers.

Raises `SourceFileError` (file, line, reason) for input that cannot be parsed at all; rows that parse
but are malformed (wrong field count) come back as row-level findings instead.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import polars as pl

ROW_INDEX = "__row__"


class SourceFileError(ValueError):
    """A whole file is unusable; the message names the file (and line where one applies)."""

    def __init__(self, path: Path | str, reason: str, line: int | None = None):
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {reason}")
        self.path, self.reason, self.line = str(path), reason, line


@dataclass
class RawFile:
    """A file's rows before normalisation: `frame` has a `__row__` column (Parquet row index or CSV
    line number); `rejects` holds lines that could not be split into the header's fields."""

    frame: pl.DataFrame
    rejects: list[dict]
    kind: str


def read_parquet(path: Path) -> RawFile:
    try:
        frame = pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise SourceFileError(path, f"corrupt or unreadable Parquet file ({str(exc).splitlines()[0]})") from None
    if frame.height == 0:
        raise SourceFileError(path, "empty file: no rows")
    return RawFile(frame.with_row_index(ROW_INDEX).with_columns(pl.col(ROW_INDEX).cast(pl.Int64)), [], "parquet")


def _is_header(fields: list[str], header: list[str]) -> bool:
    return bool(fields) and fields[0] == header[0] and not any(f.replace(".", "").replace("-", "").isdigit() for f in fields)


def read_staging_csv(path: Path) -> RawFile:
    """Parse a collector staging CSV, mapping columns by name.

    A repeated header with the same columns (appended runs, column order drift) re-maps the rows after
    it; a header with other columns fails the file, naming the line.
    """
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceFileError(path, f"not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise SourceFileError(path, "empty file: no header and no rows")
    reader = csv.reader(io.StringIO(text))
    header = [h.strip() for h in next(reader)]
    if len(set(header)) != len(header) or not all(header):
        raise SourceFileError(path, f"bad header {header!r}: blank or repeated column names", line=1)
    columns: dict[str, list] = {h: [] for h in header}
    lines: list[int] = []
    rejects: list[dict] = []
    active = header
    for fields in reader:
        line = reader.line_num
        if not fields or all(not f.strip() for f in fields):
            continue
        if _is_header(fields, header):
            renamed = [f.strip() for f in fields]
            if set(renamed) != set(header):
                added, removed = sorted(set(renamed) - set(header)), sorted(set(header) - set(renamed))
                raise SourceFileError(path, f"header changes mid-file (added {added}, removed {removed})", line=line)
            active = renamed
            continue
        if len(fields) != len(active):
            rejects.append({"line": line, "check": "field_count", "column": None,
                            "value": f"{len(fields)} fields, header has {len(active)}: {','.join(fields)}"})
            continue
        for name, value in zip(active, fields, strict=True):
            columns[name].append(value.strip() if value.strip() != "" else None)
        lines.append(line)
    frame = pl.DataFrame({ROW_INDEX: pl.Series(lines, dtype=pl.Int64),
                          **{h: pl.Series(v, dtype=pl.String) for h, v in columns.items()}})
    if frame.is_empty() and not rejects:
        raise SourceFileError(path, "empty file: a header but no rows")
    return RawFile(frame, rejects, "csv")


def read_source_file(path: Path) -> RawFile:
    if path.suffix == ".parquet":
        return read_parquet(path)
    if path.suffix == ".txt" or path.suffix == ".csv":
        return read_staging_csv(path)
    raise SourceFileError(path, "unsupported file type (expected .parquet or staging .txt/.csv)")
