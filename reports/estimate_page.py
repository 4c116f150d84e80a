"""Estimator report page: headline TTFT/TPOT per system per scenario, and the regression gate.

Renders the warehouse's stored `estimates` table (perfledger.estimator.scenarios): its scenario rows carry
the gate verdicts and the pricing's gate status and thresholds; nothing is priced or compared here.
"""

from __future__ import annotations

import polars as pl

from perfledger.reports.page import Page, Section, Table

GATE_COLUMNS = ["model", "scenario", "metric", "system", "backend", "version", "ms", "previous_ms", "delta_pct", "verdict"]
VERDICTS = ("ok", "warn", "fail", "lost", "new", "miss")


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:+.2f}%"


def estimate_page(estimates: pl.DataFrame, plots: list[tuple[str, str]]) -> Page:
    """The page of one stored pricing (a non-empty `estimates` table)."""
    rows = estimates.filter(pl.col("kind") == "scenario").sort("seq").to_dicts()
    run = rows[0]
    sections = []
    for name, model in dict.fromkeys((r["model"], r["hf_model"]) for r in rows):
        mine = [r for r in rows if r["model"] == name]
        sections.append(Section(
            f"{model}: headline estimates",
            text=["Static scenarios: TTFT/TPOT from the estimator's model assembler. Operator scenarios: the phase "
                  "time is the sum of the listed operators (latency × count). HYBRID mode; source is the least "
                  "confident tier used; a miss names what could not be priced."],
            table=Table(["scenario", "metric", "system", "backend", "version", "ms", "source", "miss"],
                        [[r["scenario"], r["metric"], r["system"], r["backend"], r["version"], r["ms"], r["source"],
                          r["error"]] for r in mine], filterable=True),
            images=[p for p in plots if p[0].startswith(f"plots/latency-{name}")]))
    c = {v: sum(1 for r in rows if r["verdict"] == v) for v in VERDICTS}
    sections.append(Section(
        f"Prediction regression gate: {run['gate_status']}",
        text=[f"Against the previous warehouse version ({run['previous_priced_at'] or 'none'}): warn above "
              f"{run['warn_pct']:g}%, fail above {run['fail_pct']:g}%.",
              f"ok {c['ok']}, warn {c['warn']}, fail {c['fail']}, lost {c['lost']}, new {c['new']}, miss {c['miss']}."],
        table=Table(GATE_COLUMNS, [[*(r[k] for k in GATE_COLUMNS[:-2]), _pct(r["delta_pct"]), r["verdict"]] for r in rows],
                    row_classes=[f"verdict-{r['verdict']}" for r in rows], filterable=True)))
    priced = sum(1 for r in rows if r["ms"] is not None)
    return Page("estimates", "Estimator report", sections,
                summary=f"{priced} of {len(rows)} scenario estimates priced; gate {run['gate_status']}")
