"""Shared CLI output conventions: one JSON object on stdout with --json, messages on stderr, exit codes."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, is_dataclass
from typing import Any, NoReturn

import typer

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_BLOCKING = 3  # `matrix compare` found a blocking transition: its own code, so CI can tell it from a bad call


def _default(value: Any) -> Any:
    if is_dataclass(value):
        return asdict(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def emit_json(payload: Any) -> None:
    """Print exactly one JSON document on stdout (scripts parse it)."""
    sys.stdout.write(json.dumps(payload, default=_default, sort_keys=False) + "\n")


def fail(message: str, *, code: int = EXIT_FAILURE, as_json: bool = False) -> NoReturn:
    """Report an error on stderr (and as `{"error": ...}` on stdout with --json) and exit."""
    if as_json:
        emit_json({"error": message})
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def number(value: Any, unit: str = "") -> str:
    """A number as a reader wants it: thousands separated, three to four significant digits, never a 17-digit
    float; `unit` follows after a space. Non-numbers (None, text) print as they are ("-" for None)."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        text = f"{value:,}"
    elif value != value or value in (float("inf"), float("-inf")):
        text = str(value)
    elif value == 0:
        text = "0"
    elif abs(value) >= 100:
        text = f"{value:,.1f}"
    elif abs(value) >= 1:
        text = f"{value:.3f}"
    else:
        text = f"{value:.4g}"
    return f"{text} {unit}" if unit else text


def print_table(columns: list[str], rows: list[list[Any]], *, title: str | None = None, err: bool = False) -> None:
    """A table with a header row (rich) on stdout, or stderr with `err`; numbers go through `number` unless
    the caller formatted them. Piped output has no colour and no wrapping, so it stays one line per row."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    stream = sys.stderr if err else sys.stdout
    table = Table(*columns, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for i, column in enumerate(table.columns):
        column.no_wrap = True
        if rows and all(row[i] is None or (isinstance(row[i], int | float) and not isinstance(row[i], bool)) for row in rows):
            column.justify = "right"  # a numeric column
    for row in rows:
        table.add_row(*(number(cell) if not isinstance(cell, str) else cell for cell in row))
    if title:  # a line of its own: a rich title wraps to the table's width
        stream.write(title + "\n")
    Console(file=stream, width=None if stream.isatty() else 100_000, highlight=False).print(table)


def progress(total: int | None, what: str, *, quiet: bool = False):
    """A rich progress bar on stderr while long work runs on an interactive terminal; silent (the same
    `advance(n)` / `update(done, total)` calls do nothing) when stderr is piped or redirected, or `quiet` (--json).
    A context manager; `total=None` is a pulsing bar for work of unknown length."""
    return _Progress(total, what, enabled=not quiet and sys.stderr.isatty())


class _Progress:
    def __init__(self, total: int | None, what: str, *, enabled: bool):
        self.total, self.what, self.enabled = total, what, enabled
        self._bar, self._task = None, None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn(self.what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 transient=True, console=Console(stderr=True))
            self._bar.start()
            self._task = self._bar.add_task(self.what, total=self.total)
        return self

    def advance(self, steps: int = 1) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, steps)

    def update(self, done: int, total: int | None) -> None:
        """The `progress(done, total)` callback the stage functions take (ingest, matrix build, export)."""
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()
