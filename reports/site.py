"""The static site under the output folder: index.html + Markdown twins, one page per report.

`build_site` reads the warehouse (quarantine, repeated measurements, ledger tables, matrix snapshots, table
history, stored estimates) and the pipeline's run summary, assembles pages (reports.page) and writes them;
every page, the ledger's included, shares the nav bar and site.css. Every file is written new and renamed into
place (perfledger.safe_io: a planted symlink is replaced, never followed), and plots are SVG files beside the
pages.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from perfledger.reports.page import Page, Section, Table, render_page
from perfledger.safe_io import check_output_folder, write_file

CSS = Path(__file__).with_name("templates") / "site.css"


def _plots(out: Path, ledgers: list[dict], estimates: pl.DataFrame) -> list[tuple[str, str]]:
    from perfledger.reports.plots import coverage_heatmap, latency_plot

    plots = []
    for entry in ledgers:
        rel = f"plots/coverage-{entry['slug'].removeprefix('ledger-')}.svg"
        write_file(out, rel, coverage_heatmap(entry["cells"], f"{entry['title']}: rows per lane x system"))
        plots.append((rel, f"coverage heatmap, {entry['title']}"))
    sweeps = estimates.filter(pl.col("kind") == "sweep").sort("seq")
    for (name,), points in sweeps.group_by("model", maintain_order=True):
        scenario, rel = points["scenario"][0], f"plots/latency-{name}.svg"
        write_file(out, rel, latency_plot(points.to_dicts(), f"{name}: {scenario}, estimated ms vs tokens"))
        plots.append((rel, f"latency vs tokens, {name} ({scenario})"))
    return plots


def _plan_pages(wh, out: Path, plans: pl.DataFrame) -> list[Page]:
    """One planning page per model of the stored plans, each question's Pareto fronts as an SVG beside it, and the
    best rows of earlier `plans` versions (time travel, at most HISTORY_VERSIONS) for the history tables."""
    from perfledger.reports.history import HISTORY_VERSIONS
    from perfledger.reports.pareto import pareto_plot
    from perfledger.reports.plan_page import plan_page, plot_path

    if not plans.height:
        return []
    for (qid,), rows in plans.filter(pl.col("kind").is_in(["best", "pareto"])).group_by("question_id", maintain_order=True):
        fronts = {m: rows.filter((pl.col("kind") == "pareto") & (pl.col("mode") == m)).sort("rank").to_dicts()
                  for m in rows["modes"][0].split(",")}
        if any(fronts.values()):
            best = rows.filter(pl.col("kind") == "best").row(0, named=True)
            title = f"{best['hf_model']} on {best['total_gpus']} × {best['system']} ({best['backend']} {best['version']})"
            write_file(out, plot_path(qid), pareto_plot(fronts, best if best["mode"] else None, title)[0])
    current = wh.table_version("plans")
    history = [wh.read_table("plans", as_of=v).filter(pl.col("kind") == "best").with_columns(plans_version=pl.lit(v))
               for v in range(current - 1, max(current - HISTORY_VERSIONS, 0) - 1, -1)]
    earlier = pl.concat(history, how="diagonal_relaxed") if history else None
    return [plan_page(model, plans.filter(pl.col("hf_model") == model), earlier)
            for model in plans.sort("seq")["hf_model"].unique(maintain_order=True)]


def _matrix(wh, hf_ids: list[str]) -> Page:
    from perfledger.ledger.matrix.store import SnapshotError, labels, read_snapshot
    from perfledger.ledger.report import OURS_LABEL
    from perfledger.reports.matrix_page import matrix_page

    try:
        label, frame = read_snapshot(wh)
    except SnapshotError:
        return matrix_page(None, None, hf_ids, [])
    stored = labels(wh)
    ours = read_snapshot(wh, OURS_LABEL)[1] if OURS_LABEL != label and OURS_LABEL in stored["label"].to_list() else None
    return matrix_page(label, frame, hf_ids, stored.to_dicts(), ours)


def _ours_agg(wh) -> dict[tuple[str, str, str, str], str]:
    """Our built matrix's agg status per (HF id, system, backend, version), {} when none is stored."""
    from perfledger.ledger.matrix.store import labels, read_snapshot
    from perfledger.ledger.report import OURS_LABEL

    if OURS_LABEL not in labels(wh)["label"].to_list():
        return {}
    frame = read_snapshot(wh, OURS_LABEL)[1].filter(pl.col("Mode") == "agg")
    return {(r[0], r[1], r[2], r[3]): r[4] for r in frame.select("HuggingFaceID", "System", "Backend", "Version",
                                                                  "Status").iter_rows()}


def _grid_coverage(wh) -> list[dict]:
    """The collector's case grids against the warehouse slices of each op's table (reports.validation)."""
    from perfledger.collector.case_grid import load_grid
    from perfledger.collector.registry import load_registry
    from perfledger.reports.validation import grid_coverage, held_cases

    grids, held, slices, curated = [], {}, {}, set(wh.curated_tables())
    for op, entry in sorted(load_registry().ops.items()):
        if entry.table not in curated:
            continue
        grid = load_grid(entry.cases)
        spec = {"op": op, "table": entry.table, "columns": list(grid.columns), "cases": list(grid.cases)}
        try:
            frame = wh.read_curated_columns(entry.table, ["system", "backend", "version", *grid.columns])
        except pl.exceptions.ColumnNotFoundError:  # a table without the grid's columns is not compared
            continue
        grids.append(spec)
        held[op] = held_cases(spec, frame)
        slices.setdefault(entry.table, sorted(frame.select("system", "backend", "version").unique().iter_rows()))
    return grid_coverage(grids, held, slices)


def index_page(run: dict, pages: list[Page], ledgers: list[dict], plots: list[tuple[str, str]],
               history: list[Section] | None = None) -> Page:
    """Run summary (stages with timings and skips, ingest counts), links to every report, plots, the
    history across warehouse versions, then the deployments and the generator's warnings on them."""
    ingest = run.get("ingest") or {}
    stages = Table(["stage", "status", "seconds"], [[s["stage"], s["status"], s["seconds"]] for s in run.get("stages", [])],
                   row_classes=[f"stage-{s['status']}" for s in run.get("stages", [])])
    counts = Table(["batches", "new", "rows accepted", "rows quarantined", "repeated keys", "failed batches"],
                   [[ingest.get("batches"), ingest.get("new_batches"), ingest.get("rows_accepted"),
                     ingest.get("rows_quarantined"), ingest.get("rows_duplicate"), len(ingest.get("failed_batches", []))]])
    reports = [(f"{e['slug']}.html", f"{e['title']}: {e['summary']}") for e in ledgers]
    reports += [(f"{p.slug}.html", f"{p.title}: {p.summary}") for p in pages]
    reports.append(("summary.md", "Run summary (Markdown: counts, warehouse contents, ledger cells)"))
    deployments = [(f"{d['folder']}/{f}", f"{d['name']} ({d['mode']}): {f}") for d in run.get("deployments", [])
                   for f in d["files"]]
    sections = [
        Section("Run", text=[f"Finished {run.get('finished_at', '')} in {run.get('seconds', 0):.1f} s; "
                             f"warehouse {run.get('warehouse', '')}."], table=stages),
        Section("Ingest (this run)", text=["What this run's ingest read and wrote; a run with nothing new writes 0 rows. "
                                           "What the warehouse holds over time: History below."], table=counts),
        Section("Reports", links=reports),
        Section("Plots", images=plots),
        *(history or []),
    ]
    if deployments:
        sections.append(Section("Deployment artifacts", links=deployments))
    planned = [(f"{p['folder']}/{f}", f"{p['label']}, best: {f}") for p in run.get("plans", []) for f in p["files"]]
    if planned:
        sections.append(Section("Planned deployment artifacts", text=[
            "Each planning question's best deployment, rendered by the generator (the plan pages say why it won)."],
            links=planned))
    warned = [[d["name"], w] for d in run.get("deployments", []) for w in d.get("warnings", [])]
    if warned:
        sections.append(Section("Generator warnings", text=[
            "What `perfledger generate` warned while rendering each deployment (a rule overriding a value the input "
            "set, a version without exact flag data, an image tag that does not match)."],
            table=Table(["deployment", "warning"], warned)))
    return Page("index", "perfledger", sections, summary="Published by `perfledger run`.")


def build_site(root: Path, out: Path, models: list[str], run: dict, *, allow_symlinked_out: bool = False) -> dict:
    """Write the whole site; returns {"index": path, "pages": [slugs]}. `out` may be a symlink to a folder
    in another tree only with `allow_symlinked_out`."""
    from perfledger.estimator.plans import PLANS_SCHEMA, PLANS_TABLE
    from perfledger.estimator.scenarios import ESTIMATES_SCHEMA, ESTIMATES_TABLE
    from perfledger.ledger.source import read_or_empty
    from perfledger.ledger.specs import find_spec
    from perfledger.reports.diff import diff_page, latest_diffs
    from perfledger.reports.estimate_page import estimate_page
    from perfledger.reports.history import history_sections
    from perfledger.reports.ledger_pages import ledger_entries, write_ledger_pages
    from perfledger.reports.plan_page import best_by_cell
    from perfledger.reports.validation import DUPLICATE_COLUMNS, validation_page
    from perfledger.warehouse.store import Warehouse

    wh = Warehouse(root)
    check_output_folder(out, allow_symlink=allow_symlinked_out).mkdir(parents=True, exist_ok=True)
    hf_ids = [find_spec(m).model for m in models]
    ledgers = ledger_entries(wh, models)
    estimates = read_or_empty(wh, ESTIMATES_TABLE, schema=ESTIMATES_SCHEMA)
    plans = read_or_empty(wh, PLANS_TABLE, schema=PLANS_SCHEMA)
    plots = _plots(out, ledgers, estimates)
    quarantine = wh.read_table("quarantine") if wh.has_table("quarantine") else None
    duplicates = (wh.read_table("duplicates", columns=DUPLICATE_COLUMNS) if wh.has_table("duplicates")
                  else pl.DataFrame(schema={c: pl.String for c in DUPLICATE_COLUMNS[:-1]} | {"spread_rel": pl.Float64}))

    pages = [
        _matrix(wh, hf_ids),
        validation_page(quarantine if quarantine is not None else pl.DataFrame(
            schema={c: pl.String for c in ("table", "check", "column", "source_file", "system", "backend", "version",
                                           "value")} | {"source_row": pl.Int64}),
            (run.get("ingest") or {}).get("failed_batches", []), duplicates, _grid_coverage(wh)),
        diff_page(latest_diffs(wh)),
    ]
    if estimates.height:
        pages.append(estimate_page(estimates, [p for p in plots if p[0].startswith("plots/latency-")], _ours_agg(wh),
                                   best_by_cell(plans)))
    pages += _plan_pages(wh, out, plans)
    pages.insert(0, index_page(run, pages, ledgers, [p for p in plots if p[0].startswith("plots/coverage-")],
                               history_sections(wh, hf_ids)))
    nav = [(p.slug, p.title if p.slug != "index" else "Home") for p in pages[:1]]
    nav += [(e["slug"], e["title"]) for e in ledgers] + [(p.slug, p.title) for p in pages[1:]]
    write_ledger_pages(ledgers, out, nav)
    for page in pages:
        for fmt in ("html", "md"):
            write_file(out, f"{page.slug}.{fmt}", render_page(page, nav, fmt))
    write_file(out, "site.css", CSS.read_text())
    return {"index": str(out / "index.html"), "pages": [p.slug for p in pages] + [e["slug"] for e in ledgers]}
