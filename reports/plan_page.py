"""Planning pages, one per model: each stored planning question's best deployment, what changed since the previous
data version, the Pareto fronts, the top configs per mode, refusals, the search's warnings and the plans gate.

Renders the warehouse's stored `plans` table (perfledger.estimator.plans): its `best` rows carry the gate
verdict and the change note written when the plan was stored (against the table's previous version), so nothing
is searched or compared here; the history table reads earlier versions of `plans` (Delta time travel).
"""

from __future__ import annotations

import polars as pl

from perfledger.reports.page import Page, Section, Table

BEST_COLUMNS = ["mode", "layout", "replicas", "GPUs per replica", "tokens/s/GPU", "tokens/s/user", "TTFT ms", "TPOT ms",
                "previous", "previous tokens/s/GPU", "change %", "verdict"]
TOP_COLUMNS = ["mode", "rank", "layout", "replicas", "GPUs per replica", "tokens/s/GPU", "tokens/s/GPU (replica)",
               "tokens/s/user", "TTFT ms", "TPOT ms"]
HISTORY_COLUMNS = ["plans version", "planned at", "best", "tokens/s/GPU", "verdict"]
GATE_LEGEND = [("verdict-ok", "ok"), ("verdict-warn", "warn: tokens/s/GPU dropped beyond warn %"),
               ("verdict-fail", "fail / lost: dropped beyond fail %, or no longer answered"),
               ("verdict-new", "new: no earlier plan"), ("verdict-refused", "refused: no deployment meets the question")]
CLUSTER = "tokens_per_s_per_gpu_cluster"


def slug(hf_model: str) -> str:
    """The page's file stem: plan-<model> (the HF id's org and name, lower case, `/` as `--`)."""
    return "plan-" + "".join(c if c.isalnum() or c in "-." else "-" for c in hf_model.replace("/", "--").lower())


def plot_path(question_id: str) -> str:
    return f"plots/pareto-{question_id}.svg"


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:+.1f}%"


def best_config(row: dict) -> str:
    """`agg tp2 b64 × 4`: the mode, the replica's layout and how many replicas fill the budget."""
    return f"{row['mode']} {row['layout']} × {row['replicas']}" if row.get("mode") else "refused"


def question_text(best: dict) -> str:
    """The question in a sentence: budget, backend and version (asked and resolved), traffic, SLA, modes."""
    asked = best["version_asked"] or f"current → {best['version'] or '?'}"
    prefix = f", cached prefix {best['prefix']:,}" if best["prefix"] else ""
    return (f"{best['total_gpus']} × {best['system']}, {best['backend']} {asked}; isl {best['isl']:,}, osl {best['osl']:,}"
            f"{prefix}; SLA TTFT ≤ {best['ttft_target_ms']:g} ms, TPOT ≤ {best['tpot_target_ms']:g} ms; modes "
            f"{best['modes']}; {best['database_mode']} data; top {best['top_n']} per mode.")


def _top_row(r: dict) -> list:
    return [r["mode"], r["rank"], r["layout"], r["replicas"], r["gpus"], r[CLUSTER], r["tokens_per_s_per_gpu"],
            r["tokens_per_s_per_user"], r["ttft_ms"], r["tpot_ms"]]


def _best_table(best: dict, tops: list[dict]) -> Table:
    """The winner first (or `none` when refused), with the gate's comparison, then each other mode's best (its top-1)."""
    previous = f"{best['previous_mode']} {best['previous_layout']}" if best["previous_mode"] else ""
    rows = [[f"{best['mode']} (best)" if best.get("mode") else "none", best["layout"] or "", best["replicas"], best["gpus"],
             best[CLUSTER], best["tokens_per_s_per_user"], best["ttft_ms"], best["tpot_ms"], previous,
             best["previous_tokens_per_s_per_gpu"], _pct(best["delta_pct"]), best["verdict"]]]
    classes = [f"verdict-{best['verdict']}"]
    for r in tops:
        if r["rank"] == 1 and r["mode"] != best.get("mode"):
            rows.append([r["mode"], r["layout"], r["replicas"], r["gpus"], r[CLUSTER], r["tokens_per_s_per_user"],
                         r["ttft_ms"], r["tpot_ms"], "", None, "", ""])
            classes.append("")
    return Table(BEST_COLUMNS, rows, row_classes=classes)


def plan_page(hf_model: str, plans: pl.DataFrame, history: pl.DataFrame | None = None) -> Page:
    """The page of one model's stored questions (`plans`: the table's rows of that model); `history`: `best` rows of
    earlier `plans` versions (with a `plans_version` column), shown per question newest first."""
    rows = plans.sort("seq").to_dicts()
    sections = []
    bests = [r for r in rows if r["kind"] == "best"]
    for best in bests:
        mine = [r for r in rows if r["question_id"] == best["question_id"]]
        tops = [r for r in mine if r["kind"] == "top"]
        label = f"{best['total_gpus']} × {best['system']} ({best['backend']})"
        refusals = [[r["mode"], r["text"]] for r in mine if r["kind"] == "refusal"]
        head = best_config(best) if best.get("mode") else "no deployment meets the question"
        text = [question_text(best), f"What changed: {best['change']}."]
        if best.get("mode"):
            text.append(f"Best: {head}, {best[CLUSTER]:,.1f} tokens/s per GPU of the whole budget, "
                        f"{best['tokens_per_s_per_user']:,.1f} tokens/s per user.")
        sections.append(Section(f"{label}: {head}", text=text, table=_best_table(best, tops),
                                legend=GATE_LEGEND,
                                images=[(plot_path(best["question_id"]), f"Pareto fronts, {hf_model} on {label}")]
                                if any(r["kind"] == "pareto" for r in mine) else []))
        if refusals:
            sections.append(Section(f"{label}: refusals", text=[
                "A mode that found no deployment says why: the SLA is too tight (with the closest value), nothing fits "
                "in GPU memory, data is missing (named), or the search does not support the model yet."],
                table=Table(["mode", "reason"], refusals)))
        if tops:
            sections.append(Section(f"{label}: top configs", text=[
                "Each mode's best configs under the TPOT target, best first. tokens/s/GPU counts every GPU of the budget "
                "(replicas × GPUs per replica may leave some idle); the replica column counts only the replica's own."],
                table=Table(TOP_COLUMNS, [_top_row(r) for r in tops], filterable=True)))
        warnings = [r["text"] for r in mine if r["kind"] == "warning"]
        if warnings:
            sections.append(Section(f"{label}: search warnings", table=Table(["warning"], [[w] for w in warnings])))
        if history is not None and history.height:
            earlier = history.filter(pl.col("question_id") == best["question_id"]).sort("plans_version", descending=True)
            if earlier.height:
                sections.append(Section(f"{label}: history", text=[
                    "The best answer stored by each earlier version of the `plans` table (Delta time travel)."],
                    table=Table(HISTORY_COLUMNS, [[r["plans_version"], r["planned_at"], best_config(r), r[CLUSTER],
                                                   r["verdict"]] for r in earlier.to_dicts()])))
    answered = sum(1 for b in bests if b.get("mode"))
    return Page(slug(hf_model), f"Plans: {hf_model}", sections,
                summary=f"{answered} of {len(bests)} planning questions answered; gate {bests[0]['gate_status']}")


def best_by_cell(plans: pl.DataFrame) -> dict[tuple[str, str, str], str]:
    """(HF id, system, backend) -> the search's best answer in a line (`agg tp2 b64 × 4: 1,234 tok/s/GPU on 8 GPUs`, or
    the refusal), for the estimate page beside each scenario; several budgets of a cell are joined."""
    out: dict[tuple[str, str, str], list[str]] = {}
    for r in plans.filter(pl.col("kind") == "best").sort("seq").iter_rows(named=True):
        text = (f"{best_config(r)}: {r[CLUSTER]:,.0f} tok/s/GPU on {r['total_gpus']} GPUs" if r.get("mode")
                else f"none on {r['total_gpus']} GPUs")
        out.setdefault((r["hf_model"], r["system"], r["backend"]), []).append(text)
    return {k: "; ".join(v) for k, v in out.items()}
