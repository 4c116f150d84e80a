"""The `perfledger` console script: one Typer app, each stage contributes its commands."""

import os
from importlib import import_module
from pathlib import Path
from typing import Annotated

import click
import typer
from typer.core import TyperGroup

from perfledger.console import EXIT_USAGE, fail
from perfledger.settings import REFERENCE_ENV, LocationError
from perfledger.warehouse.errors import ObjectStoreError, WarehouseBusy, WarehouseUnwritable


class Commands(TyperGroup):
    """The root command group. A warehouse that cannot be written (read-only, not a folder) or is busy ends
    whichever command was writing it with one line and exit 1, as does an object store that refuses a read
    (no such bucket, no credentials); a location perfledger cannot use (an unsupported scheme, object storage
    named as an output folder) is a usage error, exit 2; and a bad call of any command (unknown option,
    missing or malformed value) is one line and exit 2, `error: <what> (see <command> --help)`, not a boxed
    usage screen: one handler here, none per command."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.ClickException as exc:  # a bad root option (`perfledger --bogus`): the same one line
            if not _usage_error(exc):
                raise
            fail(f"{exc.format_message()} (see `perfledger --help`)", code=EXIT_USAGE, as_json="--json" in args)

    def invoke(self, ctx: click.Context):
        as_json = "--json" in ctx.args  # the arguments after the command name, still to be parsed
        try:
            return super().invoke(ctx)
        except (WarehouseBusy, WarehouseUnwritable) as exc:
            fail(str(exc), as_json=as_json)
        except ObjectStoreError as exc:
            fail(f"cannot read warehouse: {exc}", as_json=as_json)
        except LocationError as exc:
            fail(str(exc), code=EXIT_USAGE, as_json=as_json)
        except click.ClickException as exc:
            if not _usage_error(exc):
                raise
            where = exc.ctx.command_path if getattr(exc, "ctx", None) is not None else "perfledger"
            fail(f"{exc.format_message()} (see `{where} --help`)", code=EXIT_USAGE, as_json=as_json)


def _usage_error(exc: Exception) -> bool:
    """A Click usage error (exit 2) other than a group called bare, whose answer is its help screen."""
    return getattr(exc, "exit_code", None) == EXIT_USAGE and hasattr(exc, "format_message") \
        and type(exc).__name__ != "NoArgsIsHelpError"


app = typer.Typer(
    cls=Commands,
    no_args_is_help=True,
    add_completion=False,
    help="Ingest, validate and version LLM-inference perf data; derive ledgers, matrices, estimates, configs.",
)


def _print_version(requested: bool) -> None:
    """`perfledger --version`: the installed distribution's version, so a bug report names what ran."""
    if requested:
        from importlib.metadata import version

        typer.echo(f"perfledger {version('perfledger')}")
        raise typer.Exit()


@app.callback()
def main(reference_data: Annotated[Path | None, typer.Option(
        "--reference-data", envvar=REFERENCE_ENV, file_okay=False, exists=True,
        help="Optional reference-data folder (aic/systems, aic/model_configs, aic/catalogs) read besides the "
             "installed aic data.")] = None,
         show_version: Annotated[bool, typer.Option(
             "--version", is_eager=True, callback=_print_version, help="Print the installed version and exit.")] = False,
         ) -> None:
    """Options every command shares; stage code reads them through perfledger.settings."""
    if reference_data is not None:
        os.environ[REFERENCE_ENV] = str(reference_data.resolve())


# Each module exposes `register(app)`; keep heavy imports inside the command bodies so `--help` is fast.
STAGE_CLIS = (
    "perfledger.generator.cli",
    "perfledger.flows.cli",
    "perfledger.warehouse.cli",
    "perfledger.ledger.cli",
    "perfledger.collector.cli",
    "perfledger.estimator.cli",
    "perfledger.flows.plan_cli",
)

for _module in STAGE_CLIS:
    import_module(_module).register(app)


if __name__ == "__main__":  # pragma: no cover
    app()
