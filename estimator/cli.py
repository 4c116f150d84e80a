"""`perfledger estimate ...`: operator latencies and whole-model estimates from the CLI."""

from __future__ import annotations

from typing import Optional

import typer

DATA_HELP = "Public-layout tree (…/systems or …/systems/data) or 'aic-package' (the installed wheel); default: the warehouse."
MODE_HELP = "silicon | hybrid | empirical | sol"


def _source(data: Optional[str], warehouse: Optional[str]):
    from perfledger.estimator.context import Estimator, open_source

    return Estimator(open_source(data, warehouse))


def run_queries(op: str, base: dict, data, warehouse, mode: str, as_json: bool, queries: Optional[str]) -> None:
    """Shared body: one query from options, or one per CSV row (options fill absent columns)."""
    import polars as pl

    from perfledger.estimator.batch import estimate
    from perfledger.estimator.errors import EstimatorError
    from perfledger.estimator.ops.base import MODES
    from perfledger.console import EXIT_USAGE, emit_json, fail

    if mode.lower() not in MODES:
        fail(f"unknown --mode {mode!r}; expected one of {', '.join(MODES)}", code=EXIT_USAGE, as_json=as_json)
    try:
        est = _source(data, warehouse)
        if queries:
            frame = pl.read_csv(queries)
            frame = frame.with_columns([pl.lit(v).alias(k) for k, v in base.items() if k not in frame.columns and v is not None])
        else:
            absent = [k for k, v in base.items() if v is None]
            if absent:
                fail(f"missing option(s): {', '.join('--' + a.replace('_', '-') for a in absent)}", code=EXIT_USAGE, as_json=as_json)
            frame = pl.DataFrame({k: [v] for k, v in base.items()})
        try:
            rows = estimate(est, op, frame, mode=mode.lower()).to_dicts()
            failed = 0
        except EstimatorError:
            if not queries:
                raise
            rows, failed = _row_by_row(est, op, frame, mode.lower())
    except (EstimatorError, ValueError, OSError, pl.exceptions.PolarsError) as exc:
        fail(str(exc), as_json=as_json)
    for row in rows:
        out = {k: row[k] for k in ("latency_ms", "sol_ms", "source") if k in row} if not queries else row
        if as_json:
            emit_json(out)
        else:
            typer.echo("  ".join(f"{k}={v}" for k, v in out.items()))
    if failed:
        raise typer.Exit(1)


def _row_by_row(est, op, frame, mode):
    """Fallback for a queries file with misses: answer each row, record the error on failing rows."""
    from perfledger.estimator.batch import estimate
    from perfledger.estimator.errors import EstimatorError

    rows, failed = [], 0
    for i in range(frame.height):
        one = frame[i]
        try:
            rows.append(estimate(est, op, one, mode=mode).to_dicts()[0])
        except EstimatorError as exc:
            failed += 1
            rows.append({**one.to_dicts()[0], "error": str(exc)})
    return rows, failed


def register(app: typer.Typer) -> None:
    """Attach the `estimate` sub-app."""
    est_app = typer.Typer(no_args_is_help=True, help="Operator latencies (SOL/SILICON/HYBRID/EMPIRICAL) and model estimates.")
    app.add_typer(est_app, name="estimate")
    from perfledger.estimator.cli_ops import register_ops

    register_ops(est_app)
