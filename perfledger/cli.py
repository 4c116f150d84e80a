"""The `perfledger` console script: one Typer app, each stage contributes its commands."""

from importlib import import_module

import typer

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Ingest, validate and version LLM-inference perf data; derive ledgers, matrices, estimates, configs.",
)

# Each module exposes `register(app)`; keep heavy imports inside the command bodies so `--help` is fast.
STAGE_CLIS = (
    "perfledger.generator.cli",
    "perfledger.flows.cli",
    "perfledger.ledger.cli",
    "perfledger.collector.cli",
    "perfledger.estimator.cli",
)

for _module in STAGE_CLIS:
    import_module(_module).register(app)


if __name__ == "__main__":  # pragma: no cover
    app()
