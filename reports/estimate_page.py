"""Estimator report page: headline TTFT/TPOT per system per scenario, with each deployment's parallelism,
batch and memory fit, the deployments that do not fit apart, the plots, and the regression gate.

Renders the warehouse's stored `estimates` table (perfledger.estimator.scenarios): its scenario rows carry
the parallelism, the per-GPU memory and fit, the gate verdicts and the pricing's gate status and thresholds;
nothing is priced or compared here.
"""

from __future__ import annotations

import polars as pl

from perfledger.reports.page import Page, Section, Table, fmt

GATE_COLUMNS = ["model", "scenario", "parallelism", "metric", "system", "backend", "version", "ms", "previous_ms",
                "delta_pct", "verdict"]
VERDICTS = ("ok", "warn", "fail", "lost", "new", "miss")
HEADLINE = ["scenario", "parallelism", "GPUs", "batch", "isl", "osl", "metric", "system", "backend", "version", "ms",
            "source", "GiB per GPU", "GPU GiB", "fit", "matrix (ours, agg)", "search's best (plans)", "miss"]
FIT_LEGEND = [("fit-yes", "fits in GPU memory"), ("fit-unknown", "memory not sized (no memory model)"),
              ("fit-no", "does not fit: not a deployable number")]
FIT_CLASS = {"fits": "fit-yes", "does not fit": "fit-no"}
MISS_CHARS = 160


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:+.2f}%"


def _fit(row: dict) -> str:
    return row.get("fit") or "unknown"


def short_miss(text: str | None) -> str:
    """A miss cut to MISS_CHARS (the full message stays in the `estimates` table)."""
    text = text or ""
    return text if len(text) <= MISS_CHARS else text[: MISS_CHARS - 1] + "…"


def _headline_row(r: dict, matrix: dict, planned: dict) -> list:
    status = matrix.get((r["hf_model"], r["system"], r["backend"], r["version"]), "")
    return [r["scenario"], r.get("parallelism") or "", r.get("gpus"), r.get("batch"), r.get("isl"), r.get("osl"),
            r["metric"], r["system"], r["backend"], r["version"], r["ms"], r["source"], r.get("memory_gib"),
            r.get("capacity_gib"), _fit(r), status, planned.get((r["hf_model"], r["system"], r["backend"]), ""),
            short_miss(r["error"])]


def glance(rows: list[dict]) -> Table:
    """Scenario · parallelism · metric · backend/version x system: the ms, `✗` after a deployment that does not fit
    in GPU memory, `miss` where nothing could be priced, blank where the system has no such slice."""
    systems = sorted({r["system"] for r in rows})
    keys = list(dict.fromkeys((r["scenario"], r.get("parallelism") or "", r["metric"], f"{r['backend']} {r['version']}")
                              for r in rows))
    cells = {}
    for r in rows:
        value = "miss" if r["ms"] is None else fmt(r["ms"]) + (" ✗" if _fit(r) == "does not fit" else "")
        cells[(r["scenario"], r.get("parallelism") or "", r["metric"], f"{r['backend']} {r['version']}", r["system"])] = value
    return Table(["scenario", "parallelism", "metric", "backend", *systems],
                 [[*key, *(cells.get((*key, system), "") for system in systems)] for key in keys])


def estimate_page(estimates: pl.DataFrame, plots: list[tuple[str, str]], matrix: dict | None = None,
                  planned: dict | None = None) -> Page:
    """The page of one stored pricing (a non-empty `estimates` table); `matrix`: our built matrix's agg status
    per (HF id, system, backend, version), shown beside each row (a HW_INCOMPATIBLE system says so); `planned`: the
    stored plans' best answer per (HF id, system, backend) (reports.plan_page.best_by_cell), the deployment the
    search would pick for that model and system, beside the scenario's hand-named one."""
    matrix, planned = matrix or {}, planned or {}
    rows = estimates.filter(pl.col("kind") == "scenario").sort("seq").to_dicts()
    run = rows[0]
    sections = []
    for name, model in dict.fromkeys((r["model"], r["hf_model"]) for r in rows):
        mine = [r for r in rows if r["model"] == name]
        deployable = [r for r in mine if _fit(r) != "does not fit"]
        too_big = [r for r in mine if _fit(r) == "does not fit"]
        sections.append(Section(
            f"{model}: at a glance",
            text=["Estimated ms per system (rows: scenario, parallelism, metric, backend). ✗: the deployment does not "
                  "fit in that system's GPU memory, not a deployable number; miss: nothing could be priced."],
            table=glance(mine)))
        sections.append(Section(
            f"{model}: headline estimates",
            text=["Static scenarios: TTFT/TPOT from the estimator's model assembler. Operator scenarios: the phase "
                  "time is the sum of the listed operators (latency × count, shapes derived from the model config). "
                  "HYBRID mode; source is the least confident tier used; a miss names what could not be priced. "
                  "Parallelism is one replica's (GPUs = its GPU count); GiB per GPU is the deployment's memory "
                  "(weights, KV cache, activations, runtime) against the GPU's capacity. The search's best is the "
                  "stored plan's answer for the model on that system and backend (its planning page says more), "
                  "or none when the search found no deployment.",
                  f"{len(deployable)} rows fit in GPU memory (or are not sized); {len(too_big)} do not and are listed "
                  "apart below."],
            legend=FIT_LEGEND,
            table=Table(HEADLINE, [_headline_row(r, matrix, planned) for r in deployable],
                        row_classes=[FIT_CLASS.get(_fit(r), "fit-unknown") for r in deployable], filterable=True),
            images=[p for p in plots if p[0].startswith(f"plots/latency-{name}")]))
        if too_big:
            sections.append(Section(
                f"{model}: deployments that do not fit",
                text=["These deployments need more memory per GPU than the system has: their latency is what the "
                      "operators would take, not a number anyone can serve at. A wider parallelism (more GPUs) fits."],
                table=Table(HEADLINE, [_headline_row(r, matrix, planned) for r in too_big], row_classes=["fit-no"] * len(too_big),
                            filterable=True)))
    c = {v: sum(1 for r in rows if r["verdict"] == v) for v in VERDICTS}
    sections.append(Section(
        f"Prediction regression gate: {run['gate_status']}",
        text=[f"Against the previous warehouse version ({run['previous_priced_at'] or 'none'}): warn above "
              f"{run['warn_pct']:g}%, fail above {run['fail_pct']:g}%.",
              f"ok {c['ok']}, warn {c['warn']}, fail {c['fail']}, lost {c['lost']}, new {c['new']}, miss {c['miss']}."],
        legend=[("verdict-ok", "ok"), ("verdict-warn", "warn"), ("verdict-fail", "fail / lost"),
                ("verdict-new", "new / miss")],
        table=Table([*GATE_COLUMNS, "fit"], [[*(r.get(k) for k in GATE_COLUMNS[:-2]), _pct(r["delta_pct"]), r["verdict"],
                                              _fit(r)] for r in rows],
                    row_classes=[f"verdict-{r['verdict']}" for r in rows], filterable=True)))
    priced = sum(1 for r in rows if r["ms"] is not None)
    unfit = sum(1 for r in rows if _fit(r) == "does not fit")
    return Page("estimates", "Estimator report", sections,
                summary=f"{priced} of {len(rows)} scenario estimates priced, {unfit} of them on deployments that do not "
                        f"fit in GPU memory; gate {run['gate_status']}")
