"""`perfledger generate`: unified deployment YAML -> engine configs, run scripts, Kubernetes manifests."""

from __future__ import annotations

from pathlib import Path

import typer

from perfledger.console import EXIT_USAGE, emit_json, fail


def generate_command(
    input_yaml: Path | None = typer.Argument(None, help="Unified deployment YAML."),
    set_: list[str] = typer.Option([], "--set", help="Override Section.key=VALUE (YAML value); repeatable."),
    backend: str | None = typer.Option(None, help="vllm | sglang | trtllm (wins over the file)."),
    version: str | None = typer.Option(None, help="Backend version (wins over the file)."),
    target: str | None = typer.Option(None, help="dynamo | llm-d-helm | llm-d-kustomize."),
    out: Path | None = typer.Option(None, "--out", help="Output folder."),
    allow_symlinked_out: bool = typer.Option(
        False, "--allow-symlinked-out", help="Write into --out even when it is a symlink to a folder in another tree."),
    explain_key: str | None = typer.Option(None, "--explain", help="Print a key's schema and flags, then exit."),
    warehouse: str | None = typer.Option(None, "--warehouse", help="Warehouse whose newest data picks the default "
                                         "backend version when the input names none (default: $PERFLEDGER_WAREHOUSE "
                                         "or var/warehouse, when it exists)"),
    as_json: bool = typer.Option(False, "--json", help="One JSON object on stdout."),
) -> None:
    """Render artifacts for one deployment; prints files, mode and warnings."""
    from perfledger.generator.errors import GeneratorError, UsageError

    try:
        if explain_key is not None:
            from perfledger.generator.explain import explain, format_explain

            info = explain(explain_key)
            emit_json(info) if as_json else typer.echo(format_explain(info))
            return
        if input_yaml is None or out is None:
            fail("generate needs INPUT.yaml and --out DIR (or --explain KEY)", code=EXIT_USAGE, as_json=as_json)
        from perfledger.generator.api import generate, held_versions

        result = generate(input_yaml, set_, out, backend=backend, version=version, target=target,
                          allow_symlinked_out=allow_symlinked_out, held_versions=held_versions(warehouse))
    except UsageError as exc:
        fail(str(exc), code=EXIT_USAGE, as_json=as_json)
    except GeneratorError as exc:
        fail(str(exc), as_json=as_json)
    payload = {"files": [str(p) for p in result.files], "mode": result.mode, "warnings": result.warnings}
    if as_json:
        emit_json(payload)
        return
    for warning in result.warnings:
        typer.echo(warning, err=True)
    typer.echo(f"{result.mode}: wrote {len(result.files)} files to {out}")


def register(app: typer.Typer) -> None:
    """Attach `generate` to the root app."""
    app.command("generate")(generate_command)
