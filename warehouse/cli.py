"""Warehouse housekeeping commands: `perfledger versions TABLE` and `perfledger maintain`."""

from __future__ import annotations

from typing import Annotated

import typer

from perfledger.console import EXIT_FAILURE, EXIT_USAGE, emit_json, fail

WarehouseOpt = Annotated[str | None, typer.Option(
    "--warehouse", help="Warehouse root (default: $PERFLEDGER_WAREHOUSE or var/warehouse).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]


def _warehouse(root: str | None):
    from perfledger.warehouse.paths import resolve_root
    from perfledger.warehouse.store import Warehouse

    return Warehouse(resolve_root(root))


def register(app: typer.Typer) -> None:
    @app.command()
    def versions(table: Annotated[str, typer.Argument(help="Curated table (gemm_perf) or auxiliary table (batches).")],
                 warehouse: WarehouseOpt = None, json: JsonOpt = False) -> None:
        """A table's versions, oldest first: timestamp, operation and the batches that made each."""
        from perfledger.warehouse.history import table_versions
        from perfledger.warehouse.store import WarehouseError

        wh = _warehouse(warehouse)
        try:
            listed = table_versions(wh, table)
        except WarehouseError as exc:
            fail(str(exc), code=EXIT_FAILURE, as_json=json)
        if json:
            emit_json({"table": table, "versions": listed})
            return
        for v in listed:
            batches = ",".join(v["batches"]) or "-"
            typer.echo(f"{v['version']:>5}  {v['timestamp']}  {v['operation']:<14} {batches}")

    @app.command()
    def maintain(vacuum: Annotated[bool, typer.Option("--vacuum", help="Delete files no recent version needs.")] = False,
                 retain_days: Annotated[float, typer.Option(
                     "--retain-days", help="With --vacuum: keep what versions of the last N days need.")] = 7.0,
                 optimize: Annotated[bool, typer.Option("--optimize", help="Compact small files per partition.")] = False,
                 checkpoint: Annotated[bool, typer.Option("--checkpoint", help="Write a log checkpoint.")] = False,
                 dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be done; change nothing.")] = False,
                 warehouse: WarehouseOpt = None, json: JsonOpt = False) -> None:
        """Vacuum, compact and checkpoint every warehouse table (under the run lock; --dry-run lists only)."""
        from perfledger.warehouse.maintain import Maintenance
        from perfledger.warehouse.maintain import maintain as run_maintenance
        from perfledger.warehouse.store import WarehouseError

        try:
            plan = Maintenance(vacuum, retain_days, optimize, checkpoint, dry_run)
        except ValueError as exc:
            fail(str(exc), code=EXIT_USAGE, as_json=json)
        try:
            tables = run_maintenance(_warehouse(warehouse), plan)
        except WarehouseError as exc:
            fail(str(exc), code=EXIT_FAILURE, as_json=json)
        if json:
            emit_json({"dry_run": dry_run, "tables": tables})
            return
        verb = "would remove" if dry_run else "removed"
        for t in tables:
            parts = []
            if "vacuum" in t:
                parts.append(f"{verb} {t['vacuum']['count']} files")
            if "optimize" in t:
                parts.append(f"{'compacted' if t['optimize']['done'] else 'would compact'} {t['optimize']['files']} files")
            if "checkpoint" in t:
                parts.append(f"checkpoint at v{t['checkpoint']['version']}" + ("" if t["checkpoint"]["done"] else " (dry run)"))
            typer.echo(f"{t['table']:<40} {'; '.join(parts)}")
            for path in t.get("vacuum", {}).get("files", []) if dry_run else []:
                typer.echo(f"    {path}")
