"""`perfledger plan`: the deployment-planning question on the command line (estimator/plan/search.py answers it).

With `--out DIR` the answer is also written: plan.json, the Pareto plot (pareto.svg, pareto.png) and, for each
mode's top configs, the generator's artifacts (engine args, run scripts, manifests) under <mode>/top<k>/.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

Opt = typer.Option


def _table(answer, warnings: list[str]) -> None:
    """The human answer: one rich table per mode (its top configs), the best, the search's and the generator's
    warnings on stderr."""
    from rich.console import Console
    from rich.table import Table

    from perfledger.estimator.plan.search import layout_label

    out, err = Console(width=None if sys.stdout.isatty() else 200), Console(stderr=True)
    for mode, a in answer.modes.items():
        if not a.top:
            continue
        table = Table(title=f"{mode}: top {len(a.top)}")
        for col in ("#", "tok/s/GPU", "tok/s/user", "TTFT ms", "TPOT ms", "GPUs", "replicas", "layout"):
            table.add_column(col, justify="left" if col == "layout" else "right", no_wrap=True)
        for i, r in enumerate(a.top, 1):
            table.add_row(str(i), f"{r['tokens_per_s_per_gpu_cluster']:.1f}", f"{r['tokens_per_s_per_user']:.1f}",
                          f"{r['ttft_ms']:.1f}", f"{r['tpot_ms']:.2f}", str(r["gpus"]), str(r["replicas"]),
                          layout_label(mode, r))
        out.print(table)
    best = answer.best
    if best is not None:
        out.print(f"best: {best['mode']} {layout_label(best['mode'], best)} × {best['replicas']}: "
                  f"{best['tokens_per_s_per_gpu_cluster']:.1f} tokens/s/GPU, {best['tokens_per_s_per_user']:.1f} tokens/s/user")
    for w in warnings:
        err.print(f"warning: {w}", markup=False, highlight=False)


def _write(out: Path, answer, payload: dict, is_moe: bool) -> None:
    """Every top config rendered by the generator (its warnings added to `payload`), the Pareto plot, then
    plan.json: the same object `--json` prints."""
    import json

    from perfledger.generator.from_plan import render_row
    from perfledger.reports.pareto import pareto_plot
    from perfledger.safe_io import check_output_folder, write_file

    q = answer.question
    check_output_folder(out)
    model = payload["question"]["model"]
    title = f"{model} on {q.total_gpus} × {q.system} ({q.backend} {q.version}), isl {q.isl} osl {q.osl}"
    svg, png = pareto_plot({m: a.pareto for m, a in answer.modes.items()}, answer.best, title)
    write_file(out, "pareto.svg", svg)
    write_file(out, "pareto.png", png)
    warnings = []
    for mode, a in answer.modes.items():
        for k, row in enumerate(a.top, 1):
            _, said = render_row(out, Path(mode) / f"top{k}", row, mode=mode, model=model, backend=q.backend,
                                 isl=q.isl, osl=q.osl, is_moe=is_moe, where=f"plan {mode} top{k}")
            warnings += [f"{mode} top{k}: {w}" for w in said]
    payload["warnings"] += warnings
    write_file(out, "plan.json", json.dumps(payload, indent=1) + "\n")


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan_cmd(
        model: Annotated[str, Opt("--model", help="HF id, e.g. Qwen/Qwen3-32B")],
        total_gpus: Annotated[int, Opt("--total-gpus", help="GPUs of the deployment budget")],
        system: Annotated[str, Opt("--system", help="System name, e.g. h200_sxm")],
        backend: Annotated[str, Opt("--backend", help="trtllm | sglang | vllm")],
        isl: Annotated[int, Opt("--isl", help="Input sequence length")],
        osl: Annotated[int, Opt("--osl", help="Output sequence length")],
        ttft: Annotated[float, Opt("--ttft", help="TTFT target, ms")],
        tpot: Annotated[float, Opt("--tpot", help="TPOT target, ms")],
        version: Annotated[str | None, Opt("--version", help="Backend version (default: the newest with GEMM data)")] = None,
        prefix: Annotated[int, Opt("--prefix", help="Cached prefix tokens of every request (part of --isl)")] = 0,
        mode: Annotated[str, Opt("--mode", help="agg | disagg | all")] = "all",
        top_n: Annotated[int, Opt("--top-n", help="Configs kept per mode")] = 5,
        database_mode: Annotated[str, Opt("--database-mode", help="silicon | hybrid")] = "silicon",
        warehouse: Annotated[str | None, Opt("--warehouse", help="Warehouse root")] = None,
        data: Annotated[str | None, Opt("--data", help="Public tree instead of the warehouse: PATH or aic-package")] = None,
        out: Annotated[Path | None, Opt("--out", help="Write plan.json, the Pareto plot and the top configs' artifacts")] = None,
        as_json: Annotated[bool, Opt("--json", help="Print one JSON object on stdout")] = False,
    ) -> None:
        """The best way to serve a model on N GPUs under a TTFT / TPOT SLA: agg vs disagg, layouts, workers, batch.

        Exit 1 when no mode finds a config meeting the SLA (each mode's reason printed)."""
        from perfledger.blas import without_blas_threads
        from perfledger.console import EXIT_FAILURE, EXIT_USAGE, emit_json, fail, progress

        without_blas_threads()
        from perfledger.estimator.errors import EstimatorError
        from perfledger.estimator.plan.asked import MODES
        from perfledger.estimator.plan.question import Question, QuestionError
        from perfledger.estimator.plan.search import as_json as plan_json
        from perfledger.estimator.plan.search import plan
        from perfledger.estimator.session import Estimator, open_source
        from perfledger.gc_pause import paused_gc
        from perfledger.generator.errors import GeneratorError
        from perfledger.safe_io import UnsafeOutputError

        if mode not in MODES:
            fail(f"--mode {mode!r}: one of {', '.join(MODES)}", code=EXIT_USAGE, as_json=as_json)
        if warehouse and data:
            fail("give --warehouse or --data, not both", code=EXIT_USAGE, as_json=as_json)
        if top_n < 1:
            fail("--top-n must be >= 1", code=EXIT_USAGE, as_json=as_json)
        try:
            q = Question(model, system, backend, total_gpus, isl, osl, ttft, tpot, version=version, prefix=prefix,
                         database_mode=database_mode.lower())
        except QuestionError as exc:
            fail(str(exc), code=EXIT_USAGE, as_json=as_json)
        try:
            with paused_gc():  # a bounded search and its rendering (perfledger/gc_pause.py)
                with progress(len(MODES[mode]), f"planning {' + '.join(MODES[mode])}", quiet=as_json) as bar:
                    est = Estimator(open_source(data, warehouse))
                    answer = plan(est, q, MODES[mode], top_n, progress=bar.update)
                payload = plan_json(answer)
                if out is not None and answer.best is not None:
                    from perfledger.estimator.models.config import resolve_model
                    from perfledger.estimator.models.plans.registry import load_model

                    is_moe = bool(getattr(load_model(resolve_model(model)).dims, "experts", 0))
                    _write(out, answer, payload, is_moe)
        except (EstimatorError, GeneratorError, UnsafeOutputError, ValueError, OSError) as exc:
            fail(str(exc), as_json=as_json)
        if answer.best is None:
            reasons = "; ".join(f"{m}: {r}" for m, r in payload["reasons"].items())
            if as_json:
                emit_json(payload)
            typer.echo(f"error: no config meets the SLA ({reasons})", err=True)
            raise typer.Exit(EXIT_FAILURE)
        if as_json:
            emit_json(payload)
        else:
            _table(answer, payload["warnings"])
