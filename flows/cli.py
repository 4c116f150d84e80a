"""Foundation commands: ingest, validate, tables, run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from perfledger.console import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, emit_json, fail

WarehouseOpt = Annotated[Optional[str], typer.Option("--warehouse", help="Warehouse root (default: $PERFLEDGER_WAREHOUSE or var/warehouse).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
Sources = Annotated[list[str], typer.Argument(help="Paths (collector output, published tree, version folder) or 'aic-package'.")]
SystemOpt = Annotated[Optional[str], typer.Option("--system", help="System of collector output (else batch.yaml / folder name).")]
BackendOpt = Annotated[Optional[str], typer.Option("--backend", help="Backend of collector output.")]
VersionOpt = Annotated[Optional[str], typer.Option("--version", help="Backend version of collector output.")]


def _progress(enabled: bool):
    """A rich progress callback on an interactive terminal; None otherwise."""
    if not enabled or not sys.stderr.isatty():
        return None, None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("batches"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=True)
    task = bar.add_task("ingest", total=None)
    return bar, lambda done, total: bar.update(task, completed=done, total=total)


def _human_report(report: dict, verb: str) -> None:
    typer.echo(
        f"{verb}: {report['new_batches']} new of {report['batches']} batches; rows accepted {report['rows_accepted']}, "
        f"quarantined {report['rows_quarantined']}, repeated keys {report['rows_duplicate']}", err=True)
    for failure in report["failed_batches"]:
        typer.echo(f"FAILED {failure['source']}: {failure['error']}", err=True)


def _run_ingest(sources: list[str], warehouse: str | None, identity: dict, as_json: bool, write: bool) -> None:
    from schemas.catalog import CatalogError
    from warehouse.discover import SourceError
    from warehouse.ingest import ingest
    from warehouse.lock import WarehouseBusy
    from warehouse.paths import resolve_root
    from warehouse.store import Warehouse, WarehouseError

    target = Warehouse(resolve_root(warehouse)) if write else None
    bar, progress = _progress(not as_json)
    try:
        if bar:
            bar.start()
        report = ingest(sources, target, progress=progress, on_commit=_ledger_hook() if write else None, **identity)
    except (SourceError, CatalogError) as exc:
        fail(str(exc), code=EXIT_USAGE, as_json=as_json)
    except (WarehouseBusy, WarehouseError) as exc:
        fail(str(exc), code=EXIT_FAILURE, as_json=as_json)
    finally:
        if bar:
            bar.stop()
    payload = report.to_json()
    if as_json:
        emit_json(payload)
    else:
        _human_report(payload, "ingest" if write else "validate")
    raise typer.Exit(EXIT_FAILURE if payload["failed_batches"] else EXIT_OK)


def _ledger_hook():
    """Ledger events follow every committed ingest (see ledger.hooks)."""
    from ledger.hooks import on_ingest

    return on_ingest


def register(app: typer.Typer) -> None:
    @app.command()
    def ingest(sources: Sources, warehouse: WarehouseOpt = None, system: SystemOpt = None,
               backend: BackendOpt = None, version: VersionOpt = None, json: JsonOpt = False) -> None:
        """Validate and ingest collected results into the warehouse (identical content is a no-op)."""
        _run_ingest(sources, warehouse, {"system": system, "backend": backend, "version": version}, json, write=True)

    @app.command()
    def validate(sources: Sources, system: SystemOpt = None, backend: BackendOpt = None,
                 version: VersionOpt = None, json: JsonOpt = False) -> None:
        """Validate sources exactly as ingest would; nothing is written."""
        _run_ingest(sources, None, {"system": system, "backend": backend, "version": version}, json, write=False)

    @app.command()
    def tables(warehouse: WarehouseOpt = None, json: JsonOpt = False) -> None:
        """List curated data: one entry per table × system × family × backend × version with its rows."""
        from warehouse.inventory import curated_inventory
        from warehouse.paths import resolve_root
        from warehouse.store import Warehouse

        inventory = curated_inventory(Warehouse(resolve_root(warehouse)))
        if json:
            emit_json(inventory)
            return
        for row in inventory:
            typer.echo(f"{row['table']:36} {row['system']:20} {row['backend']:8} {row['version']:14} {row['rows']:>9}")

    @app.command()
    def run(config: Annotated[Optional[Path], typer.Option("--config", help="Pipeline config YAML (default: the embedded one).")] = None,
            warehouse: WarehouseOpt = None,
            out: Annotated[Optional[Path], typer.Option("--out", help="Output folder for the summary and reports.")] = None,
            json: JsonOpt = False) -> None:
        """The main job: ingest the configured sources, build the ledgers, write the summary."""
        from flows.config import ConfigError, load_pipeline_config
        from flows.pipeline import run_pipeline

        try:
            settings = load_pipeline_config(config, warehouse=warehouse, out=out)
        except ConfigError as exc:
            fail(str(exc), code=EXIT_USAGE, as_json=json)
        result = run_pipeline(settings)
        if json:
            emit_json(result)
        else:
            typer.echo(f"summary written to {result['summary']}")
        raise typer.Exit(EXIT_FAILURE if result["ingest"]["failed_batches"] else EXIT_OK)
