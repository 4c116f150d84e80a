"""Estimator report page: headline TTFT/TPOT per system per scenario, and the regression gate."""

from __future__ import annotations

from perfledger.reports.page import Page, Section, Table

GATE_COLUMNS = ["model", "scenario", "metric", "system", "backend", "version", "ms", "previous_ms", "delta_pct", "verdict"]


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:+.2f}%"


def estimate_page(report: dict, plots: list[tuple[str, str]]) -> Page:
    gate = report["gate"]
    rows = gate["rows"]
    sections = []
    for name, model in report["models"].items():
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
    c = gate["counts"]
    sections.append(Section(
        f"Prediction regression gate: {gate['status']}",
        text=[f"Against the previous warehouse version ({report['as_of_previous'] or 'none'}): warn above "
              f"{gate['warn_pct']:g}%, fail above {gate['fail_pct']:g}%.",
              f"ok {c['ok']}, warn {c['warn']}, fail {c['fail']}, lost {c['lost']}, new {c['new']}, miss {c['miss']}."],
        table=Table(GATE_COLUMNS, [[*(r[k] for k in GATE_COLUMNS[:-2]), _pct(r["delta_pct"]), r["verdict"]] for r in rows],
                    row_classes=[f"verdict-{r['verdict']}" for r in rows], filterable=True)))
    priced = sum(1 for r in rows if r["ms"] is not None)
    return Page("estimates", "Estimator report", sections,
                summary=f"{priced} of {len(rows)} scenario estimates priced; gate {gate['status']}")
