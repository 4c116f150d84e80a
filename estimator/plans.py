"""The `plans` table: the pipeline's planning answers per question, gated and compared with the previous data version.

Why: a planning answer is only worth keeping if the next run can say what moved. `refresh_plans` answers every
configured question (estimator.plan.asked) over the warehouse with the search (estimator.plan.search), and stores
them as the next version of the Delta table `plans` in one commit unit: per question a `best` row (the winner, or
none with the refusal), each mode's top-N (`top`, rank 1 is the mode's best) and Pareto rows (`pareto`) with the row
object `perfledger plan --json` prints, a `refusal` row per mode that found nothing (the SLA is too tight, nothing
fits, data is missing or the model is unsupported) and the search's `warning` rows. Every row names the question
(its id and fields) and the warehouse table versions it read (`planned_from`).

The gate and the change note compare each question's best cluster tokens/s/GPU with the plan stored last time --
the table's version before this write (`compared_with`, for time travel), never a recomputation: a drop beyond
warn_pct warns, beyond fail_pct (or an answer lost) fails, as the estimates gate does. The note names the batches
ingested between the two plans (the `batches` table's rows added since the previous plan's `batches` version).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import polars as pl

from perfledger.estimator.plan.asked import Asked

PLANS_TABLE = "plans"
CLUSTER = "tokens_per_s_per_gpu_cluster"  # tokens/s per GPU of the whole budget: what ranks and gates a plan
QUESTION_COLUMNS = {"question_id": pl.String, "model": pl.String, "hf_model": pl.String, "system": pl.String,
                    "backend": pl.String, "version_asked": pl.String, "version": pl.String, "total_gpus": pl.Int64,
                    "isl": pl.Int64, "osl": pl.Int64, "ttft_target_ms": pl.Float64, "tpot_target_ms": pl.Float64,
                    "modes": pl.String, "top_n": pl.Int64, "database_mode": pl.String, "prefix": pl.Int64}
PLANS_SCHEMA = {
    "seq": pl.Int64, **QUESTION_COLUMNS, "kind": pl.String, "mode": pl.String, "rank": pl.Int64, "layout": pl.String,
    CLUSTER: pl.Float64, "tokens_per_s_per_gpu": pl.Float64, "tokens_per_s_per_user": pl.Float64, "ttft_ms": pl.Float64,
    "tpot_ms": pl.Float64, "gpus": pl.Int64, "replicas": pl.Int64, "row": pl.String, "text": pl.String,
    "previous_mode": pl.String, "previous_layout": pl.String, "previous_tokens_per_s_per_gpu": pl.Float64,
    "delta_pct": pl.Float64, "verdict": pl.String, "change": pl.String, "batches_since": pl.String,
    "gate_status": pl.String, "warn_pct": pl.Float64, "fail_pct": pl.Float64, "compared_with": pl.Int64,
    "planned_at": pl.String, "planned_from": pl.String,
}
KINDS = ("best", "top", "pareto", "refusal", "warning")
VERDICTS = ("ok", "warn", "fail", "lost", "new", "refused")
METRICS = (CLUSTER, "tokens_per_s_per_gpu", "tokens_per_s_per_user", "ttft_ms", "tpot_ms", "gpus", "replicas")


def refusal(exc: Exception) -> str:
    """A search that raised, as a typed refusal reason: missing data, or an unsupported model / layout."""
    from perfledger.estimator.errors import NoDataError

    return f"{'missing data' if isinstance(exc, NoDataError) else 'unsupported'}: {exc}"


def answer(est, asked: Asked) -> dict:
    """`perfledger plan --json`'s object for one question; a mode whose search raises (a typed estimator error) is a
    refusal with its reason, so one unsupported mode or model never stops the other questions."""
    from perfledger.estimator.errors import EstimatorError
    from perfledger.estimator.plan.question import resolve_version
    from perfledger.estimator.plan.search import SEARCHES, ModeAnswer, as_json, combine

    q = asked.question
    try:
        q = resolve_version(est.source, q)
    except EstimatorError as exc:
        payload = as_json(combine(q, {m: ModeAnswer(m, [], [], refusal(exc)) for m in asked.modes}, []))
        return payload
    answers, warnings = {}, []
    for mode in asked.modes:
        try:
            answers[mode] = SEARCHES[mode](est, q, asked.top_n)
        except EstimatorError as exc:
            answers[mode] = ModeAnswer(mode, [], [], refusal(exc))
        warnings += answers[mode].warnings
    return as_json(combine(q, answers, warnings))


def _metrics(mode: str | None, row: dict | None) -> dict:
    from perfledger.estimator.plan.search import layout_label

    if row is None:
        return {}
    return {**{k: row.get(k) for k in METRICS}, "mode": mode, "layout": layout_label(mode, row),
            "row": json.dumps(row, sort_keys=True)}


def question_fields(asked: Asked, payload: dict) -> dict:
    """The question's columns of every row it stores (the version as resolved beside the version asked)."""
    q = asked.question
    return {"question_id": asked.id, "model": asked.model, "hf_model": asked.hf_model, "system": q.system,
            "backend": q.backend, "version_asked": q.version, "version": payload["question"]["version"],
            "total_gpus": q.total_gpus, "isl": q.isl, "osl": q.osl, "ttft_target_ms": q.ttft, "tpot_target_ms": q.tpot,
            "modes": ",".join(asked.modes), "top_n": asked.top_n, "database_mode": q.database_mode, "prefix": q.prefix}


def plan_rows(asked: Asked, payload: dict) -> list[dict]:
    """The table rows of one answer (`payload`: as_json's object): best, top and Pareto per mode, refusals, warnings."""
    best = payload["best"]
    rows = [{"kind": "best", **_metrics(best["mode"] if best else None, best),
             "text": None if best else "; ".join(f"{m}: {r}" for m, r in payload["reasons"].items())}]
    for mode in asked.modes:
        rows += [{"kind": "top", "rank": k, **_metrics(mode, r)} for k, r in enumerate(payload.get(mode, []), 1)]
        rows += [{"kind": "pareto", "rank": k, **_metrics(mode, r)} for k, r in enumerate(payload.get(f"{mode}_pareto", []), 1)]
        if mode in payload["reasons"]:
            rows.append({"kind": "refusal", "mode": mode, "text": payload["reasons"][mode]})
    rows += [{"kind": "warning", "text": w} for w in payload["warnings"]]
    fields = question_fields(asked, payload)
    return [{**fields, **r} for r in rows]


def gate_plans(current: list[dict], previous: list[dict] | None, warn_pct: float, fail_pct: float) -> dict:
    """Each question's best (`best` rows) against the previously stored one of the same question id: a drop in cluster
    tokens/s/GPU beyond warn_pct warns, beyond fail_pct fails; a best lost (now refused) fails; a gain is ok."""
    before = {r["question_id"]: r for r in previous or []}
    rows = []
    for r in current:
        old = before.get(r["question_id"])
        now, then = r.get(CLUSTER), (old or {}).get(CLUSTER)
        if then is None:
            verdict, delta = ("new" if now is not None else "refused"), None
        elif now is None:
            verdict, delta = "lost", None
        else:
            delta = 100.0 * (now - then) / then
            verdict = "fail" if -delta > fail_pct else "warn" if -delta > warn_pct else "ok"
        rows.append({**r, "previous_mode": (old or {}).get("mode"), "previous_layout": (old or {}).get("layout"),
                     "previous_tokens_per_s_per_gpu": then, "delta_pct": delta, "verdict": verdict})
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in VERDICTS}
    status = "no baseline" if previous is None else "fail" if counts["fail"] or counts["lost"] else "pass"
    return {"status": status, "warn_pct": warn_pct, "fail_pct": fail_pct, "counts": counts, "rows": rows}


def _config(row: dict) -> str:
    return f"{row['mode']} {row['layout']} × {row['replicas']}"


def change_text(label: str, previous: dict | None, current: dict, batches: list[str]) -> str:
    """What moved since the previous plan of the question, in one sentence ("best config for M on 8 × S moved from X
    to Y, +7.0 % tokens/s/GPU, after batch B"); `previous` None: no earlier plan; a row without a mode: refused."""
    after = f", after batch{'es' if len(batches) > 1 else ''} {', '.join(batches)}" if batches else ""
    if previous is None:
        return f"first plan of {label}" + (f": {_config(current)}" if current.get("mode") else
                                             f": refused ({current.get('text')})")
    was, now = previous.get("mode") is not None, current.get("mode") is not None
    if not was and not now:
        return f"{label}: still refused ({current.get('text')}){after}"
    if not was:
        return f"{label}: now answered: {_config(current)}, {current[CLUSTER]:,.1f} tokens/s/GPU (was refused){after}"
    if not now:
        return f"{label}: no longer answered (was {_config(previous)}): {current.get('text')}{after}"
    delta = 100.0 * (current[CLUSTER] - previous[CLUSTER]) / previous[CLUSTER]
    if _config(current) == _config(previous):
        if abs(delta) < 0.05:
            return f"best config for {label} unchanged: {_config(current)}{after}"
        return f"best config for {label} stays {_config(current)}, {delta:+.1f} % tokens/s/GPU{after}"
    return f"best config for {label} moved from {_config(previous)} to {_config(current)}, {delta:+.1f} % tokens/s/GPU{after}"


def batches_since(wh, planned_from: str | None) -> list[str]:
    """Batch ids ingested after the plan that read `planned_from` (its `batches` version), oldest first."""
    if not wh.has_table("batches"):
        return []
    now = wh.read_table("batches", columns=["batch_id"])["batch_id"].to_list()
    version = json.loads(planned_from or "{}").get("batches")
    seen = set() if version is None else set(wh.read_table("batches", as_of=version, columns=["batch_id"])["batch_id"])
    return [b for b in now if b not in seen]


def plans_frame(rows: list[dict], gated: dict, *, planned_at: str, planned_from: dict,
                compared_with: int | None) -> pl.DataFrame:
    """The `plans` table's rows of one run: each question's gated best row takes the place of its `best` row."""
    run = {"gate_status": gated["status"], "warn_pct": gated["warn_pct"], "fail_pct": gated["fail_pct"],
           "compared_with": compared_with, "planned_at": planned_at, "planned_from": json.dumps(planned_from, sort_keys=True)}
    best = {r["question_id"]: r for r in gated["rows"]}
    rows = [best[r["question_id"]] if r["kind"] == "best" else r for r in rows]
    return pl.DataFrame([{**{c: r.get(c) for c in PLANS_SCHEMA}, **run, "seq": i} for i, r in enumerate(rows)],
                        schema=PLANS_SCHEMA)


def refresh_plans(root, asked: list[Asked], gate_cfg: dict) -> dict:
    """Answer every question over the warehouse, gate the bests against the stored plans and store all as the next
    version of `plans` (one commit unit); returns the report: per question its payload, gate row and change note."""
    from perfledger.estimator.data.sources import WarehouseSource
    from perfledger.estimator.scenarios import table_versions
    from perfledger.estimator.session import Estimator
    from perfledger.warehouse.lock import run_lock
    from perfledger.warehouse.store import Warehouse

    wh = Warehouse(root)
    est = Estimator(WarehouseSource(root))
    payloads = [answer(est, a) for a in asked]
    rows = [r for a, p in zip(asked, payloads, strict=True) for r in plan_rows(a, p)]
    with run_lock(wh.root, purpose="plans"):
        compared_with = wh.table_version(PLANS_TABLE)
        previous, since = None, []
        if compared_with is not None:
            stored = wh.read_table(PLANS_TABLE, as_of=compared_with).filter(pl.col("kind") == "best")
            previous = stored.to_dicts()
            since = batches_since(wh, stored["planned_from"][0] if stored.height else None)
        gated = gate_plans([r for r in rows if r["kind"] == "best"], previous, gate_cfg["warn_pct"], gate_cfg["fail_pct"])
        before = {r["question_id"]: r for r in previous or []}
        for a, r in zip(asked, gated["rows"], strict=True):
            r.update(change=change_text(a.label, before.get(a.id), r, since), batches_since=",".join(since) or None)
        frame = plans_frame(rows, gated, planned_at=datetime.now(UTC).isoformat(timespec="microseconds"),
                            planned_from=table_versions(wh), compared_with=compared_with)
        with wh.unit(), wh.labelled("plan"):
            version = wh.write_table(PLANS_TABLE, frame, mode="overwrite")
    questions = [{"id": a.id, "label": a.label, "model": a.model, "hf_model": a.hf_model, "payload": p,
                  **{k: g[k] for k in ("verdict", "delta_pct", "change")}}
                 for a, p, g in zip(asked, payloads, gated["rows"], strict=True)]
    return {"version": version, "compared_with": compared_with, "batches_since": since, "questions": questions,
            "gate": {k: gated[k] for k in ("status", "warn_pct", "fail_pct", "counts")}}
