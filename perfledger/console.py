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
