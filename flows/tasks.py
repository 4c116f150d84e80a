"""Prefect tasks of `perfledger run`: thin wrappers over plain stage functions (IO tasks retry).

Every task takes and returns plain JSON-able values, so a result can be cached by content key
(flows.keys) and shipped to a Dask worker. Retries happen only for transient failures (flows.retry).
"""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.states import Completed

from perfledger.flows.retry import RETRY_TRANSIENT
from perfledger.warehouse.lock import run_lock
from perfledger.warehouse.store import Warehouse

IO_RETRIES = RETRY_TRANSIENT
SKIPPED = "skipped: inputs unchanged"


@task(name="skipped")
def skipped_task(stage: str):
    """Stands in for a stage whose content key matched: a Completed run saying so, in the task graph."""
    return Completed(message=SKIPPED, data={"stage": stage, "status": "skipped"})


@task(name="validate", **IO_RETRIES)
def validate_task(root: str) -> dict:
    """Quarantine counts by reason (the validation report's data)."""
    from perfledger.reports.validation import reasons

    wh = Warehouse(root)
    if not wh.has_table("quarantine"):
        return {"findings": 0, "reasons": []}
    quarantine = wh.read_table("quarantine")
    return {"findings": quarantine.height, "reasons": reasons(quarantine).to_dicts()}


@task(name="build-ledger", **IO_RETRIES)
def ledger_task(root: str, model: str) -> dict:
    """Derive and store the model's ledger cells (events appended for changes); return their overview."""
    from perfledger.ledger.record import rebuild_cells
    from perfledger.ledger.specs import find_spec
    from perfledger.ledger.view import cell_overview

    spec = find_spec(model)
    return cell_overview(spec, rebuild_cells(Warehouse(root), spec))


def matrix_dir(path: str) -> Path:
    """A configured matrix folder; `aic-package` is the installed wheel's systems/support_matrix."""
    if path != "aic-package":
        return Path(path)
    from perfledger.warehouse.discover import aic_package_root

    return aic_package_root().parent / "support_matrix"


@task(name="import-matrices", **IO_RETRIES)
def matrix_task(root: str, matrices: list[dict], build_models: list[str]) -> list[dict]:
    """Store each configured support-matrix folder as its labelled snapshot, then build ours
    (label `perfledger`) for `build_models` from the warehouse and the estimator."""
    from perfledger.ledger.matrix.api import build_matrix
    from perfledger.ledger.matrix.reader import read_matrix
    from perfledger.ledger.matrix.store import BUILT_SOURCE, store_snapshot
    from perfledger.ledger.matrix.summary import summarize

    wh = Warehouse(root)
    out = []
    for entry in matrices:
        folder = matrix_dir(entry["path"])
        frame = read_matrix(folder)
        with run_lock(wh.root, purpose="matrix import"):
            store_snapshot(wh, frame, entry["label"], str(folder))
        out.append(summarize(frame, entry["label"]))
    if build_models:
        frame = build_matrix(wh, build_models)
        with run_lock(wh.root, purpose="matrix build"):
            store_snapshot(wh, frame, "perfledger", BUILT_SOURCE)
        out.append(summarize(frame, "perfledger"))
    return out


@task(name="estimate", **IO_RETRIES)
def estimate_task(root: str, scenarios: str, models: list[str], gate: dict) -> dict:
    """Price the reference scenarios, gate them and store them as the warehouse's `estimates` table."""
    from perfledger.estimator.scenarios import ScenarioModel, refresh_estimates
    from perfledger.ledger.specs import find_spec

    scope = {name: ScenarioModel(spec.model, tuple(spec.systems)) for name in models for spec in [find_spec(name)]}
    return refresh_estimates(root, Path(scenarios), scope, gate)


def plan_folder(hf_model: str, question_id: str) -> str:
    """Where a question's best deployment is rendered, relative to the output folder."""
    return f"plans/{hf_model.replace('/', '--')}/{question_id}"


@task(name="plan", **IO_RETRIES)
def plan_task(root: str, out: str, plans: list[dict], gate: dict, held: dict[str, list[str]]) -> dict:
    """Answer the configured planning questions, store them as the warehouse's `plans` table (gated against the
    previous plans) and render each question's best deployment through the generator into <out>/plans/<model>/<id>/
    (engine args, run scripts, manifests); a question refused now has its earlier artifacts removed."""
    from perfledger.estimator.models.config import resolve_model
    from perfledger.estimator.models.plans.registry import load_model
    from perfledger.estimator.plan.asked import Asked
    from perfledger.estimator.plans import refresh_plans
    from perfledger.generator.from_plan import clear_rendered, render_row

    report = refresh_plans(root, [Asked.from_json(p) for p in plans], gate)
    for q in report["questions"]:
        q["folder"], best, asked = plan_folder(q["hf_model"], q["id"]), q["payload"]["best"], q["payload"]["question"]
        q["files"], q["render_warnings"] = [], []
        if best is None:
            clear_rendered(Path(out) / q["folder"])
            continue
        is_moe = bool(getattr(load_model(resolve_model(q["hf_model"])).dims, "experts", 0))
        q["files"], q["render_warnings"] = render_row(
            Path(out), Path(q["folder"]), best, mode=best["mode"], model=q["hf_model"],
            backend=asked["backend"], isl=asked["isl"], osl=asked["osl"], is_moe=is_moe, where=f"plan {q['label']}",
            held_versions=held)
    return report


@task(name="generate", **IO_RETRIES)
def generate_task(deployment: str, out: str, held: dict[str, list[str]]) -> dict:
    """Render one deployment YAML's artifacts into <out>/deployments/<stem>/; a YAML naming no version gets
    the newest release whose backend version the warehouse holds (`held`: backend -> versions, from
    generator.api.held_versions), as `perfledger generate --warehouse` does."""
    from perfledger.generator.api import generate

    stem = Path(deployment).stem
    folder = Path(out) / "deployments" / stem
    result = generate(Path(deployment), [], folder, held_versions=held)
    return {"name": stem, "folder": f"deployments/{stem}", "mode": result.mode, "warnings": result.warnings,
            "files": sorted(str(p.relative_to(folder)) for p in result.files)}


@task(name="publish", **IO_RETRIES)
def publish_task(root: str, out: str, models: list[str], run: dict, allow_symlinked_out: bool = False) -> dict:
    from perfledger.reports.site import build_site
    from perfledger.reports.summary import write_summary

    site = build_site(root, Path(out), models, run, allow_symlinked_out=allow_symlinked_out)
    return {**site, "summary": str(write_summary(Path(out), run))}
