"""`perfledger matrix import|count|compare|labels|build|explain`: support-matrix snapshots in the warehouse."""

from __future__ import annotations

import typer

from perfledger.console import EXIT_USAGE, emit_json, fail

matrix_app = typer.Typer(no_args_is_help=True, help="Support-matrix snapshots: import, count, compare, build, explain.")
WAREHOUSE = typer.Option(None, "--warehouse", help="Warehouse root (default: $PERFLEDGER_WAREHOUSE, then var/warehouse).")
JSON = typer.Option(False, "--json", help="Print one JSON object on stdout.")
MODEL_HELP = "HF id, lane-spec name (kimi-k3) or a path to a config.json; an unknown name lists close matches"


def matrix_model(name: str, frames, as_json: bool) -> str:
    """The HuggingFaceID a user's model name means (schemas.model_names, knowing the frames' models too)."""
    from perfledger.schemas.model_names import UnknownModel, resolve_model_name

    known = sorted({hf for frame in frames for hf in frame["HuggingFaceID"].unique().to_list() if hf})
    try:
        ref = resolve_model_name(name, also=known)
    except UnknownModel as exc:
        fail(str(exc), as_json=as_json)
    if ref.hf_id is None:
        fail(f"model {name}: its config.json names no HF id (_name_or_path); give the HF id", as_json=as_json)
    return ref.hf_id


def emit(payload, as_json: bool, text: str) -> None:
    """One JSON document with --json, else one human line."""
    if as_json:
        emit_json(payload)
    else:
        typer.echo(text)


def _warehouse(root: str | None):
    from perfledger.warehouse.paths import resolve_root
    from perfledger.warehouse.store import Warehouse

    return Warehouse(resolve_root(root))


@matrix_app.command("import")
def import_cmd(directory: str = typer.Argument(..., help="CSV-per-system directory (with index.json) or one CSV."),
               label: str = typer.Option(..., "--label", help="Snapshot label, e.g. head-095f58a."),
               warehouse: str | None = WAREHOUSE, as_json: bool = JSON) -> None:
    """Validate a support matrix and store it as a labelled snapshot (re-importing a label replaces it)."""
    from pathlib import Path

    from perfledger.ledger.matrix.reader import MatrixFormatError, read_matrix
    from perfledger.ledger.matrix.store import SnapshotError, store_snapshot
    from perfledger.ledger.matrix.summary import summarize

    try:
        frame = read_matrix(Path(directory))
        wh = _warehouse(warehouse)
        from perfledger.warehouse.lock import run_lock

        with run_lock(wh.root, purpose="matrix import"):
            store_snapshot(wh, frame, label, str(Path(directory).resolve()))
    except (MatrixFormatError, SnapshotError) as exc:
        fail(str(exc), as_json=as_json)
    summary = summarize(frame, label)
    emit(summary, as_json, f"{label}: {summary['rows']:,} rows, {len(summary['models'])} models; "
         + _statuses(summary["by_status"]))


@matrix_app.command("count")
def count_cmd(model: str = typer.Option(..., "--model", help=MODEL_HELP),
              label: str | None = typer.Option(None, "--label", help="Snapshot label (default: latest import)."),
              warehouse: str | None = WAREHOUSE, as_json: bool = JSON) -> None:
    """Rows of one model in a stored snapshot, by status (exit 1 when the snapshot has none)."""
    from perfledger.ledger.matrix.store import SnapshotError, read_snapshot
    from perfledger.ledger.matrix.summary import count_model

    try:
        label, frame = read_snapshot(_warehouse(warehouse), label)
    except SnapshotError as exc:
        fail(str(exc), as_json=as_json)
    model = matrix_model(model, [frame], as_json)
    result = count_model(frame, model)
    if not result["rows"]:
        fail(f"{model} has no rows in snapshot {label!r}", as_json=as_json)
    emit(result, as_json, f"{model} in {label}: {result['rows']} rows, " + _statuses(result["by_status"]))


def _statuses(by_status: dict) -> str:
    """`PASS 12, FAIL 3` rather than a dict repr."""
    return ", ".join(f"{status} {n:,}" for status, n in by_status.items()) or "no rows"


@matrix_app.command("compare")
def compare_cmd(old: str = typer.Argument(..., help="Old state: a stored label, a directory or a CSV."),
                new: str = typer.Argument(..., help="New state: a stored label, a directory or a CSV."),
                model: str | None = typer.Option(None, "--model", help="Only this model: " + MODEL_HELP),
                warehouse: str | None = WAREHOUSE, as_json: bool = JSON) -> None:
    """Added/removed/changed rows on the six-column key. Exit 0 same, 1 changes, 3 a blocking transition.

    Rows checked under different GPU budgets (`--total-gpus N` in Command; one 8-GPU replica for a matrix
    we built) are compared but never blocking: the output says when budgets differ."""
    from perfledger.ledger.matrix.compare import compare_matrices
    from perfledger.ledger.matrix.reader import MatrixFormatError
    from perfledger.ledger.matrix.store import SnapshotError, resolve

    try:
        wh = _warehouse(warehouse)
        old_name, a = resolve(wh, old)
        new_name, b = resolve(wh, new)
    except (MatrixFormatError, SnapshotError) as exc:
        fail(str(exc), code=EXIT_USAGE, as_json=as_json)
    if model is not None:
        import polars as pl

        model = matrix_model(model, [a, b], as_json)
        a, b = (f.filter(pl.col("HuggingFaceID") == model) for f in (a, b))
    diff = compare_matrices(a, b)
    payload = diff.as_json(old_name, new_name)
    if model is not None:
        payload["model"] = model
    if as_json:
        emit_json(payload)
    else:
        _print_compare(payload, diff)
    raise typer.Exit(diff.exit_code)


def _print_compare(payload: dict, diff) -> None:
    from perfledger.console import print_table

    def gpus(budgets):
        return ", ".join("unknown" if g is None else f"{g} GPUs" for g in budgets) or "none"

    scope = f" ({payload['model']})" if "model" in payload else ""
    typer.echo(f"{payload['old']} -> {payload['new']}{scope}: +{payload['added']} -{payload['removed']} "
               f"~{payload['changed']} status changes, {payload['metadata_changes']} metadata changes, "
               f"{payload['blocking']} blocking")
    budgets = payload["budgets"]
    if budgets["old"] != budgets["new"]:
        typer.echo(f"GPU budgets differ: {payload['old']} checked {gpus(budgets['old'])}, {payload['new']} "
                   f"{gpus(budgets['new'])}; {payload['budget_differs']} status changes between different budgets "
                   "are not called blocking (see rows.budget_differs in --json)")
    rows = [[r["category"], r["HuggingFaceID"], r["System"], r["Backend"], r["Version"], r["Mode"],
             f"{r['old']} -> {r['new']}"] for r in diff.blocking[:20]]
    if rows:
        print_table(["blocking", "model", "system", "backend", "version", "mode", "status"], rows,
                    title=f"blocking changes (first {len(rows)} of {len(diff.blocking)})")


@matrix_app.command("labels")
def labels_cmd(warehouse: str | None = WAREHOUSE, as_json: bool = JSON) -> None:
    """Stored snapshot labels with row counts, oldest first."""
    from perfledger.ledger.matrix.store import labels

    rows = labels(_warehouse(warehouse)).to_dicts()
    if as_json:
        emit_json({"labels": rows})
    else:
        from perfledger.console import print_table

        print_table(["label", "rows", "imported at", "source"],
                    [[r["label"], r["rows"], r["imported_at"], r["snapshot_source"]] for r in rows])


@matrix_app.command("build")
def build_cmd(models: list[str] = typer.Argument(..., help="Models: " + MODEL_HELP),
              label: str = typer.Option("perfledger", "--label", help="Store the result as this snapshot label."),
              system: str | None = typer.Option(None, "--system", help="Only this system (replays one row)."),
              backend: str | None = typer.Option(None, "--backend", help="Only this backend."),
              version: str | None = typer.Option(None, "--version", help="Only this backend version."),
              store: bool = typer.Option(True, "--store/--no-store", help="Store the result as a snapshot."),
              warehouse: str | None = WAREHOUSE, as_json: bool = JSON) -> None:
    """Our own matrix from the warehouse and the estimator; stored as a labelled snapshot.

    A filtered build (--system/--backend/--version) must not replace the full default snapshot with a
    subset: it needs --no-store or another --label. With --no-store the rows are printed."""
    from perfledger.ledger.matrix.api import MatrixBuildError, build_matrix
    from perfledger.ledger.matrix.rules import load_rules
    from perfledger.ledger.matrix.store import BUILT_SOURCE, store_snapshot
    from perfledger.ledger.matrix.summary import summarize
    from perfledger.warehouse.lock import run_lock

    filtered = any(v is not None for v in (system, backend, version))
    if filtered and store and label == "perfledger":
        fail("a filtered build would replace the full 'perfledger' snapshot with a subset; "
             "pass --no-store or another --label", code=EXIT_USAGE, as_json=as_json)
    wh = _warehouse(warehouse)
    rules = load_rules()
    from perfledger.console import progress

    try:
        with progress(None, "pricing cells") as bar:
            frame = build_matrix(wh, models, system=system, backend=backend, version=version, progress=bar.update)
    except MatrixBuildError as exc:
        fail(str(exc), code=EXIT_USAGE if exc.usage else 1, as_json=as_json)
    if store:
        with run_lock(wh.root, purpose="matrix build"):
            store_snapshot(wh, frame, label, BUILT_SOURCE)
    summary = summarize(frame, label)
    if not store:
        summary["matrix"] = frame.select(rules.columns).to_dicts()
    if as_json or store:
        emit(summary, as_json, f"{label}: {summary['rows']:,} rows; {_statuses(summary['by_status'])}")
        return
    from perfledger.console import print_table

    typer.echo(f"{label} (not stored): {summary['rows']:,} rows; {_statuses(summary['by_status'])}")
    print_table(["model", "system", "backend", "version", "mode", "status", "source / reason"],
                [[r["HuggingFaceID"], r["System"], r["Backend"], r["Version"], r["Mode"], r["Status"],
                  r["Source"] or r["ErrMsg"]] for r in summary["matrix"]])


@matrix_app.command("explain")
def explain_cmd(model: str = typer.Argument(..., help=MODEL_HELP),
                imported: str = typer.Argument(..., help="The reference state: a stored label, a directory or a CSV."),
                ours: str = typer.Option("perfledger", "--ours", help="Our built matrix: a stored label, directory or CSV."),
                warehouse: str | None = WAREHOUSE, as_json: bool = JSON) -> None:
    """Where our matrix and the imported one disagree for a model: keys counted by transition and reason."""
    from perfledger.ledger.matrix.explain import model_disagreements
    from perfledger.ledger.matrix.reader import MatrixFormatError
    from perfledger.ledger.matrix.store import SnapshotError, resolve
    from perfledger.ledger.specs import LaneSpecError, spec_for

    try:
        spec = spec_for(model)
    except LaneSpecError as exc:
        fail(str(exc), as_json=as_json)
    try:
        wh = _warehouse(warehouse)
        (ours_name, mine), (imported_name, theirs) = resolve(wh, ours), resolve(wh, imported)
    except (MatrixFormatError, SnapshotError) as exc:
        fail(str(exc), code=EXIT_USAGE, as_json=as_json)
    result = {"model": spec.model, "ours": ours_name, "imported": imported_name,
              **model_disagreements(mine, theirs, spec.model)}
    emit(result, as_json, f"{spec.model}: {result['agree']} agree, {len(result['disagree'])} disagree, "
         f"{result['only_ours']} only ours, {result['only_imported']} only imported")
    if not as_json and result["by_reason"]:
        from perfledger.console import print_table

        print_table(["keys", "transition", "reason"], [[r["keys"], r["transition"], r["reason"]] for r in result["by_reason"]])
