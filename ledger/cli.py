"""`perfledger ledger build|report|decide|events` and the `matrix` group."""

from __future__ import annotations

import typer

from perfledger.console import EXIT_USAGE, emit_json, fail
from perfledger.ledger.matrix.cli import JSON, WAREHOUSE, _warehouse, matrix_app

ledger_app = typer.Typer(no_args_is_help=True, help="Bring-up ledgers derived from the warehouse (lane specs in schemas/lanes/).")
AS_OF = typer.Option(None, "--as-of", help="ISO timestamp, or a version of the warehouse's batches table.")


MODEL = typer.Argument(..., help="HF id (moonshotai/Kimi-K3), lane-spec name (kimi-k3) or a path to its config.json; "
                                 "an unknown name lists close matches.")


def _spec(model: str, as_json: bool):
    from perfledger.ledger.specs import LaneSpecError, spec_for

    try:
        return spec_for(model)
    except LaneSpecError as exc:
        fail(str(exc), as_json=as_json)


def _cells(wh, spec, as_of: str | None, as_json: bool, record: bool):
    """(as_of stamp, cells): time travel when --as-of, else the warm state or a fresh derivation."""
    from perfledger.ledger.source import build_cells, resolve_as_of
    from perfledger.ledger.specs import LaneSpecError
    from perfledger.ledger.state import current_cells
    from perfledger.warehouse.lock import run_lock

    try:
        stamp = resolve_as_of(wh, as_of)
        if not wh.curated_tables():
            fail(f"warehouse {wh.root} holds no curated tables; run `perfledger ingest` first", as_json=as_json)
        if stamp is not None:
            return stamp, build_cells(wh, spec, stamp)
        if not record:
            return None, current_cells(wh, spec, record=False)[0]
        with run_lock(wh.root, purpose="ledger build"):
            return None, current_cells(wh, spec, record=True)[0]
    except (LaneSpecError, ValueError) as exc:
        fail(str(exc), code=EXIT_USAGE if isinstance(exc, ValueError) and "--as-of" in str(exc) else 1, as_json=as_json)


@ledger_app.command("build")
def build_cmd(model: str = MODEL,
              warehouse: str | None = WAREHOUSE, as_of: str | None = AS_OF, as_json: bool = JSON,
              record: bool = typer.Option(True, "--record/--no-record",
                                          help="Store the cells and append change events.")) -> None:
    """Derive the model's lane cells (rows, kernel sources, status, claim) from the warehouse."""
    from perfledger.ledger.view import build_payload

    spec = _spec(model, as_json)
    wh = _warehouse(warehouse)
    stamp, cells = _cells(wh, spec, as_of, as_json, record)
    payload = build_payload(spec, cells, stamp)
    if as_json:
        emit_json(payload)
        return
    from perfledger.console import print_table

    print_table(["lane", "system", "backend", "version", "rows", "status", "claim"],
                [[c["lane"], c["system"], c["backend"], c["version"], c["rows"], c["status"], c["claim"]]
                 for c in payload["cells"]], title=f"{spec.model}: {len(payload['cells'])} cells")
    statuses = ", ".join(f"{status} {n:,}" for status, n in payload["by_status"].items())
    typer.echo(f"{statuses}; {len(payload['mismatches'])} claim mismatch(es)")


@ledger_app.command("report")
def report_cmd(model: str = MODEL, fmt: str = typer.Option("md", "--format", help="md or html."),
               out: str = typer.Option("-", "--out", help="Output file; - (the default) prints the document on stdout."),
               warehouse: str | None = WAREHOUSE,
               as_of: str | None = AS_OF,
               matrix_label: str | None = typer.Option(None, "--matrix-label",
                                                       help="Support-matrix snapshot (default: latest import)."),
               ours_label: str = typer.Option("perfledger", "--ours",
                                              help="Our built matrix to explain against the imported one."),
               as_json: bool = JSON) -> None:
    """Render the final-state ledger record (Markdown or HTML) from the warehouse tables, to a file or stdout."""
    from pathlib import Path

    from perfledger.ledger.matrix.store import SnapshotError
    from perfledger.ledger.report import record_context, render
    from perfledger.safe_io import UnsafeOutputError, write_file

    if fmt not in ("md", "html"):
        fail(f"--format {fmt!r}: expected md or html", code=EXIT_USAGE, as_json=as_json)
    to_stdout = out == "-"
    if to_stdout and as_json:
        fail("--json needs --out FILE: stdout holds the JSON summary, not the document", code=EXIT_USAGE, as_json=True)
    spec = _spec(model, as_json)
    wh = _warehouse(warehouse)
    stamp, cells = _cells(wh, spec, as_of, as_json, record=False)
    try:
        context = record_context(wh, spec, cells, stamp, matrix_label, ours_label)
    except SnapshotError as exc:
        fail(str(exc), as_json=as_json)
    document = render(context, fmt)
    if to_stdout:
        typer.echo(document, nl=not document.endswith("\n"))
        return
    target = Path(out)
    try:  # a new file renamed over the name: a symlink planted at --out is replaced, never written through
        write_file(target.parent, target.name, document)
    except UnsafeOutputError as exc:
        fail(str(exc), as_json=as_json)
    if as_json:
        emit_json({"model": spec.model, "format": fmt, "out": str(out), "cells": cells.height})
    else:
        typer.echo(f"wrote {out}")


@ledger_app.command("decide")
def decide_cmd(model: str = MODEL, date: str = typer.Option(..., "--date", help="YYYY-MM-DD"),
               text: str = typer.Option(..., "--text"), lane: str | None = typer.Option(None, "--lane"),
               warehouse: str | None = WAREHOUSE, as_json: bool = JSON) -> None:
    """Record a dated owner decision or note (optionally about one lane)."""
    from perfledger.ledger.decisions import DecisionError, make_decision
    from perfledger.ledger.source import DECISIONS_TABLE, now_iso
    from perfledger.warehouse.lock import run_lock

    spec = _spec(model, as_json)
    try:
        row = make_decision(spec, date, text, lane, now_iso())
    except DecisionError as exc:
        fail(str(exc), code=EXIT_USAGE, as_json=as_json)
    wh = _warehouse(warehouse)
    with run_lock(wh.root, purpose="ledger decide"):
        version = wh.write_table(DECISIONS_TABLE, row, mode="append")
    if as_json:
        emit_json({**row.to_dicts()[0], "table_version": version})
    else:
        typer.echo(f"recorded decision for {spec.model} on {row['date'][0]}")


@ledger_app.command("events")
def events_cmd(model: str = MODEL, warehouse: str | None = WAREHOUSE, as_json: bool = JSON) -> None:
    """The model's change events (collect, append, replace, prune, relabel, ...) in time order."""
    from perfledger.ledger.record import stored_events

    spec = _spec(model, as_json)
    rows = stored_events(_warehouse(warehouse), spec.model).to_dicts()
    if as_json:
        emit_json({"model": spec.model, "events": rows})
        return
    from perfledger.console import print_table

    print_table(["at", "kind", "lane", "system", "backend", "version", "rows before", "rows after", "batches"],
                [[e["at"], e["kind"], e["lane"], e["system"], e["backend"], e["version"], e["rows_before"], e["rows_after"],
                  ", ".join(e["batch_ids"])] for e in rows], title=f"{spec.model}: {len(rows)} events")


def register(app: typer.Typer) -> None:
    """Attach `ledger` and `matrix` command groups."""
    app.add_typer(ledger_app, name="ledger")
    app.add_typer(matrix_app, name="matrix")
