"""Per-op `estimate` commands (gemm, moe, comm) over one table of options, and the helpers every command shares."""

from __future__ import annotations

import inspect

import typer

DATA_HELP = "Public-layout tree (…/systems or …/systems/data) or 'aic-package' (the installed wheel); default: the warehouse."
MODE_HELP = "silicon | hybrid | empirical | sol"


def _source(data: str | None, warehouse: str | None):
    from perfledger.estimator.session import Estimator, open_source

    return Estimator(open_source(data, warehouse))


ANSWER_COLUMNS = ("latency_ms", "sol_ms", "source", "energy_wms", "power_w")  # energy / power: null without measured power


def run_queries(op: str, base: dict, data, warehouse, mode: str, as_json: bool, queries: str | None,
                note: str | None = None, explain: bool = False) -> None:
    """Shared body: one query from options, or one per CSV row (options fill absent columns); `note` joins each
    answer; `explain` (--explain-miss) says, when a single query misses, which slices and grid ranges exist."""
    import polars as pl

    from perfledger.console import EXIT_USAGE, emit_json, fail, number, print_table
    from perfledger.estimator.batch import estimate
    from perfledger.estimator.errors import EstimatorError
    from perfledger.estimator.ops.base import MODES

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
                flags = ", ".join("--" + a.replace("_", "-") for a in absent)
                fail(f"missing option(s): {flags}", code=EXIT_USAGE, as_json=as_json)
            frame = pl.DataFrame({k: [v] for k, v in base.items()})
        try:
            rows = estimate(est, op, frame, mode=mode.lower()).to_dicts()
            failed = 0
        except EstimatorError as exc:
            if not queries:
                if explain:
                    _explain_and_fail(est, op, base, mode.lower(), exc, as_json, _flags(op))
                raise
            rows, failed = _row_by_row(est, op, frame, mode.lower())
    except (EstimatorError, ValueError, OSError, pl.exceptions.PolarsError) as exc:
        fail(str(exc), as_json=as_json)
    outs = [{**({k: row[k] for k in ANSWER_COLUMNS if k in row} if not queries else row),
             **({"note": note} if note else {})} for row in rows]
    if as_json:
        for out in outs:
            emit_json(out)
    elif queries:
        columns = list(dict.fromkeys(k for out in outs for k in out))
        print_table(columns, [[out.get(c) for c in columns] for out in outs])
    else:
        for out in outs:
            power = f"   energy {number(out['energy_wms'], 'W·ms')} ({number(out['power_w'], 'W')})" \
                if out.get("energy_wms") is not None else ""
            typer.echo(f"latency {number(out['latency_ms'], 'ms')}   sol {number(out['sol_ms'], 'ms')}   "
                       f"source {out['source']}{power}" + (f"\nnote: {out['note']}" if "note" in out else ""))
    if failed:
        raise typer.Exit(1)


def _flags(op: str) -> dict[str, str]:
    """Query column -> the command's flag for it (`tp` is `--moe-tp` on `estimate moe`)."""
    return {name: (opt.param_decls[0] if opt.param_decls else "--" + name.replace("_", "-"))
            for name, _, opt in OP_OPTIONS[op][1]}


def _explain_and_fail(est, op: str, query: dict, mode: str, exc: Exception, as_json: bool, flags: dict) -> None:
    """--explain-miss: the miss, then the nearest slices, the values that exist where they differ, the axis
    ranges the query falls outside and a hint (stderr; with --json one object {"error", "explain"})."""
    from perfledger.console import EXIT_FAILURE, emit_json, print_table
    from perfledger.estimator.errors import EstimatorError
    from perfledger.estimator.slices import explain_miss

    try:
        why = explain_miss(est, op, query, mode)
    except EstimatorError as inner:
        why = {"error": str(inner)}
    if as_json:
        emit_json({"error": str(exc), "explain": why})
        raise typer.Exit(EXIT_FAILURE)
    typer.echo(f"error: {exc}", err=True)
    if "error" in why:
        typer.echo(f"cannot list the slices: {why['error']}", err=True)
        raise typer.Exit(EXIT_FAILURE)
    for option, values in why["differs"].items():
        typer.echo(f"{flags[option]} {query[option]} not collected; nearest slices have: {', '.join(values)}", err=True)
    for option, (lo, hi) in why["outside"].items():
        typer.echo(f"{flags[option]} {query[option]} is outside the collected range {lo}..{hi}", err=True)
    if why["nearest"]:
        columns = list(why["nearest"][0])
        print_table(columns, [[r[c] for c in columns] for r in why["nearest"]],
                    title=f"nearest {why['table']} slices ({len(why['nearest'])} of {why['slices']})", err=True)
    typer.echo(f"hint: {why['hint']}", err=True)
    raise typer.Exit(EXIT_FAILURE)


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


# Options every per-op command shares (one OptionInfo serves every command that names it).
SYSTEM = typer.Option(None, help="System name, e.g. h200_sxm")
BACKEND = typer.Option(None, help="trtllm | sglang | vllm")
VERSION = typer.Option(None, help="Backend version folder")
MODE = typer.Option("silicon", help=MODE_HELP)
DATA = typer.Option(None, "--data", help=DATA_HELP)
WAREHOUSE = typer.Option(None, "--warehouse", help="Warehouse root")
QUERIES = typer.Option(None, "--queries", help="CSV of queries (columns named as the options, e.g. quant,m,n,k; "
                        "options fill absent columns). Prints one line per row: the row's columns plus latency_ms, "
                        "sol_ms and source (an `error` column where a row misses; exit 1 then); JSON lines with --json")
EXPLAIN_MISS = typer.Option(False, "--explain-miss", help="When the query finds no data: list the nearest slices, the "
                            "values and grid ranges that exist, and whether --mode hybrid can transfer")
JSON = typer.Option(False, "--json", help="Print JSON")


def model_for(model: str | None, model_config: str | None):
    """The ModelConfig that `--model` names (an HF id, a lane-spec name or a config path, resolved by
    schemas.model_names as every command resolves it) or that `--model-config PATH` reads (--model then labels it)."""
    from perfledger.estimator.models.config import model_config as named_config
    from perfledger.estimator.models.config import model_config_at
    from perfledger.schemas.model_names import UnknownModel, resolve_model_name

    if model_config:
        try:
            label = resolve_model_name(model).label if model else None
        except UnknownModel:
            label = model  # a name of the user's own for their checkpoint
        return model_config_at(model_config, name=label)
    ref = resolve_model_name(model)
    return model_config_at(ref.config_path, name=ref.label) if ref.config_path else named_config(ref.hf_id)


def _priced(compute, as_json: bool, bad_usage: str | None) -> dict:
    """Run a whole-model pricing call; usage problems exit 2, estimator/data errors exit 1 (named)."""
    from perfledger.console import EXIT_USAGE, fail
    from perfledger.estimator.errors import EstimatorError

    if bad_usage:
        fail(bad_usage, code=EXIT_USAGE, as_json=as_json)
    try:
        return compute()
    except (EstimatorError, ValueError, OSError) as exc:
        fail(str(exc), as_json=as_json)


_STR, _INT = str | None, int | None

# Per-op query options, in query-column order: (name, type, option). The shared tail (mode, data,
# warehouse, queries, json) is added by _op_command.
OP_OPTIONS = {
    "gemm": ('GEMM latency: {"latency_ms", "sol_ms", "source", "energy_wms", "power_w"}.', [
        ("system", _STR, SYSTEM), ("backend", _STR, BACKEND), ("version", _STR, VERSION),
        ("quant", _STR, typer.Option(None, help="GEMM quant, e.g. bfloat16, fp8")),
        ("m", _INT, typer.Option(None, help="Tokens (rows of A)")),
        ("n", _INT, typer.Option(None, help="Output features")),
        ("k", _INT, typer.Option(None, help="Input features")),
        ("low_precision_input", bool, typer.Option(
            False, "--low-precision-input",
            help="fp8_static: the input is already low precision (also minus scale_matrix)")),
    ]),
    "moe": ('MoE block latency: {"latency_ms", "sol_ms", "source", "energy_wms", "power_w"}.', [
        ("system", _STR, SYSTEM), ("backend", _STR, BACKEND), ("version", _STR, VERSION),
        ("quant", _STR, typer.Option(None, help="MoE quant, e.g. bfloat16, fp8, nvfp4")),
        ("distribution", str, typer.Option("power_law_1.2", help="Token-to-expert workload distribution")),
        ("gated", bool, typer.Option(True, "--gated/--non-gated", help="SwiGLU (gated) or plain FFN experts")),
        ("topk", _INT, typer.Option(None, help="Experts per token")),
        ("experts", _INT, typer.Option(None, help="Number of experts")),
        ("hidden", _INT, typer.Option(None, help="Hidden size")),
        ("inter", _INT, typer.Option(None, help="Expert intermediate size")),
        # the query columns stay tp/ep; the flags are named as `estimate static` names them (one meaning per flag)
        ("tp", int, typer.Option(1, "--moe-tp", help="MoE tensor-parallel size")),
        ("ep", int, typer.Option(1, "--moe-ep", help="MoE expert-parallel size")),
        ("tokens", _INT, typer.Option(None, help="Tokens entering the MoE block")),
    ]),
    "comm": ('NCCL collective latency: {"latency_ms", "sol_ms", "source", "energy_wms", "power_w", "note"}.', [
        ("system", _STR, typer.Option(None, help="System name (its spec picks the NCCL version)")),
        ("op", _STR, typer.Option(None, help="all_gather | reduce_scatter | all_reduce | alltoall")),
        ("quant", str, typer.Option("half", help="half | int8")),
        ("num_gpus", _INT, typer.Option(None, help="GPUs in the collective")),
        ("elements", _INT, typer.Option(None, help="Message size in elements")),
    ]),
}
# Options a per-op command takes as its siblings do but does not query by, and the note its answers carry.
UNQUERIED = {
    "comm": ([("backend", _STR, BACKEND), ("version", _STR, VERSION)],
             "NCCL data is per system: --backend/--version do not change the answer"),
}
_TAIL = [("mode", str, MODE), ("data", _STR, DATA), ("warehouse", _STR, WAREHOUSE), ("queries", _STR, QUERIES),
         ("explain_miss", bool, EXPLAIN_MISS), ("as_json", bool, JSON)]


REQUIRED_NOTE = " (required unless --queries has the column)"


def _marked_required(options) -> list:
    """The options with `--help` marking those without a default: required, unless a --queries file gives the
    column (copies: one OptionInfo serves several commands, and comm's --backend is not required)."""
    import copy

    marked = []
    for name, kind, opt in options:
        if opt.default is None:
            opt = copy.copy(opt)
            opt.help = (opt.help or "") + REQUIRED_NOTE
        marked.append((name, kind, opt))
    return marked


def _op_command(est_app: typer.Typer, op: str) -> None:
    """One per-op command: its options become one query row (or fill absent CSV columns)."""
    doc, options = OP_OPTIONS[op]
    unqueried, note = UNQUERIED.get(op, ([], None))
    options = _marked_required(options)

    def command(**kw) -> None:
        tail = {name: kw.pop(name) for name, _, _ in [*_TAIL, *unqueried]}
        run_queries(op, kw, tail["data"], tail["warehouse"], tail["mode"], tail["as_json"], tail["queries"], note,
                    explain=tail["explain_miss"])

    command.__signature__ = inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=kind)
         for name, kind, opt in [*options, *unqueried, *_TAIL]])
    command.__doc__ = doc
    command.__name__ = op
    est_app.command(op)(command)


def register_ops(est_app: typer.Typer) -> None:
    for op in OP_OPTIONS:
        _op_command(est_app, op)
