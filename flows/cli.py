"""Foundation commands: ingest, validate, tables, run."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from perfledger.console import EXIT_BLOCKING, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, emit_json, fail

WarehouseOpt = Annotated[str | None, typer.Option(
    "--warehouse", help="Warehouse root, a folder or s3://bucket/prefix (default: $PERFLEDGER_WAREHOUSE or var/warehouse).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
Sources = Annotated[list[str], typer.Argument(help="Paths (collector output, published tree, version folder) or 'aic-package'.")]
SystemOpt = Annotated[str | None, typer.Option("--system", help="System of collector output (else batch.yaml / folder name).")]
BackendOpt = Annotated[str | None, typer.Option("--backend", help="Backend of collector output.")]
VersionOpt = Annotated[str | None, typer.Option("--version", help="Backend version of collector output.")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="Pipeline config YAML (default: the embedded one).")]
OutOpt = Annotated[str | None, typer.Option("--out", help="Output folder for the site, summary and artifacts (local).")]
RunnerOpt = Annotated[str, typer.Option("--runner", help="local (threads) or dask (prefect-dask).")]
AllowSymlinkedOutOpt = Annotated[bool, typer.Option(
    "--allow-symlinked-out", help="Write into --out even when it is a symlink to a folder in another tree.")]
AddressOpt = Annotated[str | None, typer.Option(
    "--address", help="Dask scheduler, e.g. tcp://host:8786 (default: a local cluster).")]
VerboseOpt = Annotated[bool, typer.Option(
    "--verbose", "-v", help="Show Prefect's INFO logs (default: warnings and errors only, as under make).")]


def _progress(enabled: bool):
    """A rich progress callback on an interactive terminal; None otherwise."""
    if not enabled or not sys.stderr.isatty():
        return None, None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("batches"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=True)
    task = bar.add_task("ingest", total=None)
    return bar, lambda done, total: bar.update(task, completed=done, total=total)


def _spinner(enabled: bool, what: str):
    """A live status line on an interactive terminal while the flow runs; a no-op otherwise."""
    from contextlib import nullcontext

    if not enabled or not sys.stderr.isatty():
        return nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(f"perfledger {what}: ingest → validate → ledger → matrix → estimate → generate → publish")


def _human_report(report: dict, verb: str) -> None:
    """The summary on stdout (it is the command's answer), each failed batch on stderr."""
    typer.echo(
        f"{verb}: {report['new_batches']:,} new of {report['batches']:,} batches; rows accepted {report['rows_accepted']:,}, "
        f"quarantined {report['rows_quarantined']:,}, repeated keys {report['rows_duplicate']:,}")
    for failure in report["failed_batches"]:
        typer.echo(f"FAILED {failure['source']}: {failure['error']}", err=True)


def _run_ingest(sources: list[str], warehouse: str | None, identity: dict, as_json: bool, write: bool) -> None:
    from perfledger.schemas.catalog import CatalogError
    from perfledger.warehouse.discover import SourceError
    from perfledger.warehouse.ingest import ingest
    from perfledger.warehouse.lock import WarehouseUnwritable
    from perfledger.warehouse.paths import resolve_root
    from perfledger.warehouse.store import Warehouse, WarehouseError

    wh = Warehouse(resolve_root(warehouse))
    target = wh if write else None
    bar, progress = _progress(not as_json)
    try:
        if bar:
            bar.start()
        report = ingest(sources, target, progress=progress, on_commit=_ledger_hook() if write else None,
                        known_in=None if write else wh, **identity)
    except (SourceError, CatalogError) as exc:
        fail(str(exc), code=EXIT_USAGE, as_json=as_json)
    except WarehouseError as exc:
        fail(str(exc), code=EXIT_FAILURE, as_json=as_json)
    except WarehouseUnwritable:
        raise  # told in one line by the root command group (perfledger.cli.Commands), as for every writer
    except OSError as exc:  # disk full, permissions outside a Delta commit (lock file, raw input copy)
        fail(f"cannot write warehouse {target.root if target else ''}: {exc} (the batch was not recorded; re-run once fixed)",
             code=EXIT_FAILURE, as_json=as_json)
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
    from perfledger.ledger.hooks import on_ingest

    return on_ingest


def register(app: typer.Typer) -> None:
    @app.command()
    def ingest(sources: Sources, warehouse: WarehouseOpt = None, system: SystemOpt = None,
               backend: BackendOpt = None, version: VersionOpt = None, json: JsonOpt = False) -> None:
        """Validate and ingest collected results into the warehouse (identical content is a no-op)."""
        _run_ingest(sources, warehouse, {"system": system, "backend": backend, "version": version}, json, write=True)

    @app.command()
    def validate(sources: Sources, warehouse: WarehouseOpt = None, system: SystemOpt = None, backend: BackendOpt = None,
                 version: VersionOpt = None, json: JsonOpt = False) -> None:
        """Validate sources exactly as ingest would (content the warehouse holds is known); nothing is written."""
        _run_ingest(sources, warehouse, {"system": system, "backend": backend, "version": version}, json, write=False)

    @app.command()
    def tables(warehouse: WarehouseOpt = None,
               table: Annotated[list[str] | None, typer.Option("--table", help="Only these tables (e.g. moe_perf).")] = None,
               system: Annotated[list[str] | None, typer.Option("--system", help="Only these systems.")] = None,
               backend: Annotated[list[str] | None, typer.Option("--backend", help="Only these backends.")] = None,
               version: Annotated[list[str] | None, typer.Option("--version", help="Only these backend versions.")] = None,
               json: JsonOpt = False) -> None:
        """List curated data: one entry per table × system × family × backend × version with its rows.

        Filters are repeatable; a filter value the warehouse does not hold is an error listing the values it does."""
        from perfledger.warehouse.inventory import curated_inventory, filter_inventory
        from perfledger.warehouse.paths import resolve_root
        from perfledger.warehouse.store import Warehouse

        wh = Warehouse(resolve_root(warehouse))
        inventory = curated_inventory(wh)
        if not inventory:
            fail(f"warehouse {wh.root} holds no curated tables; run `perfledger ingest` first", as_json=json)
        wanted = {"table": table, "system": system, "backend": backend, "version": version}
        try:
            inventory = filter_inventory(inventory, {k: v for k, v in wanted.items() if v})
        except LookupError as exc:
            fail(str(exc.args[0]), as_json=json)
        if json:
            emit_json(inventory)
            return
        from perfledger.console import print_table

        columns = ["table", "system", "family", "backend", "version", "rows"]
        print_table(columns, [[row[c] for c in columns] for row in inventory],
                    title=f"{len(inventory)} slices, {sum(r['rows'] for r in inventory):,} rows in {wh.root}")

    @app.command()
    def run(config: ConfigOpt = None, warehouse: WarehouseOpt = None, out: OutOpt = None,
            runner: RunnerOpt = "local", address: AddressOpt = None, allow_symlinked_out: AllowSymlinkedOutOpt = False,
            verbose: VerboseOpt = False, json: JsonOpt = False) -> None:
        """The main job: ingest → validate → ledger → matrix → estimate → generate → publish."""
        _run_pipeline(config, warehouse, out, runner, address, None, None, json, allow_symlinked_out, verbose)

    @app.command()
    def backfill(since: Annotated[str, typer.Option("--since", help="First collection date (YYYY-MM-DD).")],
                 until: Annotated[str | None, typer.Option("--until", help="Last collection date (inclusive).")] = None,
                 systems: Annotated[list[str] | None, typer.Option("--systems", help="Only batches of these systems.")] = None,
                 models: Annotated[list[str] | None,
                                   typer.Option("--models", help="Models to re-derive (default: the config's).")] = None,
                 config: ConfigOpt = None, warehouse: WarehouseOpt = None, out: OutOpt = None,
                 runner: RunnerOpt = "local", address: AddressOpt = None,
                 allow_symlinked_out: AllowSymlinkedOutOpt = False, verbose: VerboseOpt = False,
                 json: JsonOpt = False) -> None:
        """Re-derive ledger, matrix and reports for batches collected in a window (idempotent)."""
        window = {"since": since, "until": until, "systems": list(systems or [])}
        _run_pipeline(config, warehouse, out, runner, address, window, list(models or []), json, allow_symlinked_out,
                      verbose)

    @app.command()
    def serve(file: Annotated[Path | None, typer.Option(
                  "--file", help="Deployments file (default: prefect.yaml in the working directory).")] = None,
              dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the deployments and exit.")] = False,
              ephemeral: Annotated[bool, typer.Option(
                  "--ephemeral",
                  help="Serve without PREFECT_API_URL (a temporary server: schedules end with this process).")] = False,
              json: JsonOpt = False) -> None:
        """Serve the prefect.yaml deployments (schedules) against the configured Prefect server."""
        from perfledger.flows import make_prefect_home

        make_prefect_home()
        from perfledger.flows.serve import DeploymentError, ServerMissing, check_server, load_deployments, serve_all

        try:
            deployments = load_deployments(file)
        except DeploymentError as exc:
            fail(str(exc), code=EXIT_USAGE, as_json=json)
        if dry_run:
            payload = [d.describe() for d in deployments]
            if json:
                emit_json(payload)
                return
            for p in payload:
                typer.echo(f"{p['name']}: {p['schedules']}{' (paused)' if p['paused'] else ''}")
                for note in p["notes"]:
                    typer.echo(f"  note: {note}")
            return
        try:
            check_server(ephemeral)
        except ServerMissing as exc:  # the environment lacks a server: a failure (1), not a bad call
            fail(str(exc), as_json=json)
        for d in deployments:
            for note in d.describe()["notes"]:
                typer.echo(f"{d.name}: {note}", err=True)
        serve_all(deployments)

    @app.command("diff")
    def diff_cmd(table: Annotated[str, typer.Argument(help="Curated table, e.g. gemm_perf.")],
                 old: Annotated[int, typer.Option("--from", help="Older table version.")],
                 new: Annotated[int | None, typer.Option("--to", help="Newer table version (default: latest).")] = None,
                 threshold: Annotated[float, typer.Option("--threshold", help="Relative move to list (0.05 = 5%).")] = 0.05,
                 warehouse: WarehouseOpt = None, json: JsonOpt = False) -> None:
        """Rows added / removed / changed between two versions of a curated table, and moves above a threshold."""
        from perfledger.reports.diff import table_diff
        from perfledger.warehouse.history import check_version
        from perfledger.warehouse.paths import resolve_root
        from perfledger.warehouse.store import Warehouse, WarehouseError

        wh = Warehouse(resolve_root(warehouse))
        latest = wh.table_version(table, curated=True)
        if latest is None:
            import difflib

            known = wh.curated_tables()
            close = difflib.get_close_matches(table, known, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; tables: {', '.join(known)}" if known else ""
            fail(f"no curated table {table!r} in warehouse {wh.root}{hint}", as_json=json)
        from perfledger.console import progress

        try:
            for version in (old, new):
                if version is not None:
                    check_version(wh, table, version)
        except WarehouseError as exc:
            fail(str(exc), as_json=json)
        try:
            with progress(None, f"diffing {table}"):  # one polars join: a pulsing bar, no steps to count
                d = table_diff(wh, table, old, latest if new is None else new, threshold)
        except WarehouseError as exc:
            fail(str(exc), code=EXIT_USAGE, as_json=json)
        payload = {k: d[k] for k in ("table", "from", "to", "added", "removed", "changed", "added_slices", "removed_slices")}
        payload["moves"] = d["moves"].height
        if json:
            emit_json(payload)
        else:
            typer.echo(f"{table} {payload['from']} -> {payload['to']}: +{payload['added']} -{payload['removed']} "
                       f"~{payload['changed']}, {payload['moves']} moved more than {threshold:.0%}")

    @app.command("export")
    def export_cmd(layout: Annotated[str, typer.Argument(help="Output layout: aic (the public systems/data tree).")],
                   out: Annotated[str, typer.Argument(help="Output folder (created; must be empty or absent; local).")],
                   warehouse: WarehouseOpt = None,
                   systems: Annotated[list[str] | None, typer.Option("--systems", help="Only these systems.")] = None,
                   json: JsonOpt = False) -> None:
        """Write the curated warehouse in a publishable layout (Parquet + collection_meta.yaml + reuse.yaml)."""
        from perfledger.settings import is_object_uri
        from perfledger.warehouse.export import ExportError, export_aic
        from perfledger.warehouse.paths import resolve_root
        from perfledger.warehouse.store import Warehouse

        if layout != "aic":
            fail(f"unknown layout {layout!r}; expected: aic", code=EXIT_USAGE, as_json=json)
        if is_object_uri(out):
            fail(f"{out}: export writes a local folder; object storage holds only the warehouse", code=EXIT_USAGE,
                 as_json=json)
        from perfledger.console import progress

        try:
            with progress(None, "exporting tables") as bar:
                result = export_aic(Warehouse(resolve_root(warehouse)), Path(out), systems=list(systems or []),
                                    progress=bar.update)
        except ExportError as exc:
            fail(str(exc), as_json=json)
        if json:
            emit_json(result)
        else:
            typer.echo(f"exported {result['files']} tables ({result['rows']} rows) to {out}")


def _lane_names(models: list[str], as_json: bool) -> list[str]:
    """The lane-spec names of the models named (--models or the config's, any naming schemas.model_names
    takes), checked before a flow runs: an unknown one is one line listing close matches, not a task's traceback."""
    from perfledger.ledger.specs import LaneSpecError, spec_for

    try:
        return [spec_for(model).path.stem for model in models]
    except LaneSpecError as exc:
        fail(f"--models: {exc}", code=EXIT_USAGE, as_json=as_json)


def _quiet_prefect(verbose: bool) -> None:
    """Prefect logs at WARNING unless -v (INFO) or the caller's PREFECT_LOGGING_LEVEL says otherwise; set before
    Prefect is imported, which reads it once."""
    if verbose:
        os.environ["PREFECT_LOGGING_LEVEL"] = "INFO"
    else:
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def _run_pipeline(config, warehouse, out, runner, address, window, models, as_json, allow_symlinked_out,
                  verbose: bool = False) -> None:
    from dataclasses import replace

    from perfledger.ledger.backfill import BackfillError, parse_window

    if runner not in ("local", "dask"):
        fail(f"--runner {runner!r}: expected local or dask", code=EXIT_USAGE, as_json=as_json)
    if address is not None and runner != "dask":
        fail(f"--address {address} needs --runner dask (the {runner} runner has no scheduler)", code=EXIT_USAGE, as_json=as_json)
    if window is not None:  # before Prefect starts: the message alone, not after a flow run's traceback
        try:
            parse_window(window)
        except BackfillError as exc:
            fail(str(exc), code=EXIT_USAGE, as_json=as_json)
    _quiet_prefect(verbose)
    from perfledger.flows import make_prefect_home

    make_prefect_home()
    from perfledger.flows.config import ConfigError, load_pipeline_config
    from perfledger.flows.pipeline import PipelineBusy, run_pipeline
    from perfledger.safe_io import UnsafeOutputError
    from perfledger.settings import reports_dir

    try:
        reports_dir(out)  # an object-store --out is refused here (LocationError: exit 2), before anything runs
        settings = replace(load_pipeline_config(config, warehouse=warehouse, out=Path(out) if out else None),
                           allow_symlinked_out=allow_symlinked_out)
        if models:
            settings = replace(settings, models=models)
        settings = replace(settings, models=_lane_names(settings.models, as_json))
        with _spinner(not as_json, "backfill" if window else "run"):
            result = run_pipeline(settings, runner=runner, address=address, backfill=window)
    except (ConfigError, BackfillError) as exc:
        fail(str(exc), code=EXIT_USAGE, as_json=as_json)
    except (PipelineBusy, UnsafeOutputError) as exc:
        fail(str(exc), as_json=as_json)
    if as_json:
        emit_json(result)
    else:
        from perfledger.console import print_table

        print_table(["stage", "status", "seconds"], [[st["stage"], st["status"], st["seconds"]] for st in result["stages"]],
                    err=True)
        if result.get("summary"):
            typer.echo(f"summary written to {result['summary']}")
        if result.get("site"):
            typer.echo(f"site written to {result['site']}")
    if result["ingest"]["failed_batches"]:
        raise typer.Exit(EXIT_FAILURE)
    raise typer.Exit(EXIT_BLOCKING if result.get("gate") == "fail" else EXIT_OK)  # estimates' or plans' regression gate
