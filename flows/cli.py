"""CLI commands that drive flows and the warehouse: run, ingest, validate, tables."""

import typer


def register(app: typer.Typer) -> None:
    """Attach the foundation commands to the root app."""
