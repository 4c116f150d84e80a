"""`perfledger collect`: Mode 2 of the collector (several ops, device pool, resume) from the command line."""

from __future__ import annotations

from pathlib import Path

import typer


def _devices(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"--devices {text!r}: expected comma-separated integers like 0,1,2") from None


def register(app: typer.Typer) -> None:
    @app.command(context_settings={"allow_interspersed_args": True})
    def collect(
        ops: list[str] = typer.Option(..., "--ops", help="ops to collect (repeat, comma-separate or list them)"),
        more_ops: list[str] | None = typer.Argument(None, hidden=True),
        out: Path = typer.Option(..., "--out", help="output folder (staging CSVs, batch.yaml, metadata)"),
        backend: str = typer.Option("cpu", "--device-backend", help="how cases run: cpu | torch (--backend names the "
                                    "serving framework elsewhere)"),
        old_backend: str | None = typer.Option(None, "--backend", hidden=True),
        devices: str | None = typer.Option(None, "--devices", help="device ids, e.g. 0,1,2 (default: all visible)"),
        resume: bool = typer.Option(False, "--resume", help="skip cases already done or failed in the checkpoint"),
        retry_failed: bool = typer.Option(False, "--retry-failed", help="with --resume: run failed cases again"),
        limit: int | None = typer.Option(None, "--limit", min=1, help="at most N cases per op"),
        case_filter: list[str] | None = typer.Option(None, "--case-filter", help="keep cases containing S (OR)"),
        plan_only: bool = typer.Option(False, "--plan-only", help="print the resolved plan as JSON and exit"),
        isolate: bool = typer.Option(False, "--isolate", help="run every case in a fresh child process"),
        system: str | None = typer.Option(None, "--system", help="system name for batch.yaml (cpu: cpu_local)"),
        image: str | None = typer.Option(None, "--image", help="container image recorded in collection_meta"),
        timeout: float | None = typer.Option(None, "--timeout", help="per-case timeout in seconds"),
        grid: list[str] | None = typer.Option(None, "--grid", help="OP=PATH: case grid YAML replacing the op's own"),
        as_json: bool = typer.Option(False, "--json", help="one JSON summary on stdout"),
    ) -> None:
        """Measure operator cases and write staging CSVs that `perfledger ingest` reads."""
        from perfledger.collector.backends import BackendUnavailable, get_backend
        from perfledger.collector.case_grid import CaseGridError
        from perfledger.collector.checkpoint import CheckpointError
        from perfledger.collector.meta import MetaError
        from perfledger.collector.registry import RegistryError
        from perfledger.collector.runner import CollectError, CollectRequest, build_plan, plan_json
        from perfledger.collector.runner import collect as run_collect
        from perfledger.console import EXIT_USAGE, emit_json, fail

        if old_backend is not None:
            fail(f"collect --backend {old_backend}: the device backend is --device-backend {old_backend} now "
                 "(--backend names the serving framework in every other command)", code=EXIT_USAGE, as_json=as_json)
        grids = {}
        for item in grid or ():
            op_name, sep, path = item.partition("=")
            if not sep or not Path(path).is_file():
                fail(f"--grid {item!r}: expected OP=PATH to an existing YAML file", code=EXIT_USAGE, as_json=as_json)
            grids[op_name] = Path(path)
        names = [n for chunk in [*ops, *(more_ops or [])] for n in chunk.replace(",", " ").split()]
        req = CollectRequest(backend=backend, ops=names, out=out, devices=_devices(devices), resume=resume,
                             retry_failed=retry_failed, limit=limit, case_filters=tuple(case_filter or ()),
                             isolate=isolate, system=system, image=image, timeout_s=timeout,
                             grids=grids)
        try:
            if plan_only:
                be = get_backend(backend)
                emit_json(plan_json(build_plan(req, be, be.sm_version(0) if backend != "cpu" else None)))
                return
            summary = run_collect(req)
        except (RegistryError, CaseGridError) as exc:
            fail(str(exc), code=EXIT_USAGE, as_json=as_json)
        except (BackendUnavailable, CheckpointError, MetaError, CollectError) as exc:
            fail(str(exc), as_json=as_json)
        if as_json:
            emit_json(summary)
        else:
            for op, info in summary["ops"].items():
                if info.get("gated"):
                    typer.echo(f"{op}: not run: {info['gated']}")
                else:
                    typer.echo(f"{op}: {info['done']} done, {info['failed']} failed of {info['planned']} planned "
                               f"-> {out / (info['table'] + '.txt')} ({info['rows']} rows)")
        if any(info.get("gated") for info in summary["ops"].values()):
            raise typer.Exit(1)
