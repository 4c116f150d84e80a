"""Support-matrix page: the imported snapshot beside our built one, their compare result (blocking changes
first, with the GPU budget each side checked), a system x backend pivot of both, then one tab per system with
a row filter, status colours, the filled Source column and the replay command per row."""

from __future__ import annotations

import polars as pl

from perfledger.reports.page import Page, Section, Table

SHOWN = ["HuggingFaceID", "Backend", "Version", "Mode", "Status", "Source", "Reason", "Command"]
ERR_CHARS = 240
STATUS_LEGEND = [("status-PASS", "PASS"), ("status-HYBRID_PASS", "HYBRID_PASS"), ("status-FAIL", "FAIL"),
                 ("status-HW_INCOMPATIBLE", "HW_INCOMPATIBLE / FRAMEWORK_INCOMPATIBLE")]


def short_error(text: str | None) -> str:
    """A traceback's last line (the error itself), cut to ERR_CHARS; the full text stays in the snapshot."""
    lines = [line.strip() for line in str(text or "").replace("\\n", "\n").splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= ERR_CHARS else last[: ERR_CHARS - 1] + "…"


def source_of(row: dict, pass_statuses: tuple[str, ...], legacy_source: str) -> str:
    """The Source a reader needs: the tier a pass was priced from (legacy rows carry none: the rules' legacy
    tier), and for a row that did not pass, that nothing was priced."""
    if row.get("Source"):
        return row["Source"]
    return legacy_source if row["Status"] in pass_statuses else "none (not priced)"


def status_counts(frames: dict[str, pl.DataFrame]) -> Table:
    """Status x snapshot counts, side by side."""
    statuses = sorted({s for f in frames.values() for s in f["Status"].to_list()})
    rows = [[s, *(f.filter(pl.col("Status") == s).height for f in frames.values())] for s in statuses]
    return Table(["Status", *frames], rows, row_classes=[f"status-{s}" for s in statuses])


def pivot(sides: dict[str, pl.DataFrame]) -> Table:
    """System x backend, each snapshot's column beside the other's: the status counts of the cell's rows (every
    version and mode), e.g. `2 PASS · 4 FAIL`."""
    cells: dict[tuple[str, str, str], dict[str, int]] = {}
    for name, frame in sides.items():
        for system, backend, status in frame.select("System", "Backend", "Status").iter_rows():
            counts = cells.setdefault((system, backend, name), {})
            counts[status] = counts.get(status, 0) + 1
    backends = sorted({b for _, b, _ in cells})
    systems = sorted({s for s, _, _ in cells})
    columns = [(b, name) for b in backends for name in sides]
    rows = [[system, *(" · ".join(f"{n} {s}" for s, n in sorted(cells.get((system, b, name), {}).items())) or "–"
                       for b, name in columns)] for system in systems]
    return Table(["System", *(f"{b} ({name})" for b, name in columns)], rows)


def compare_section(imported_label: str, imported: pl.DataFrame, ours: pl.DataFrame, ours_budget: int) -> Section:
    """Our matrix against the imported one on the six-column key: blocking changes first, then the rest."""
    from perfledger.ledger.matrix.compare import compare_matrices
    from perfledger.ledger.matrix.explain import reason_of

    diff = compare_matrices(imported, ours)
    key_columns = ("HuggingFaceID", "System", "Backend", "Version", "Mode")
    why = {tuple(r[c] for c in key_columns): reason_of(r["Status"], r["ErrMsg"], r["Source"])
           for r in ours.iter_rows(named=True)}
    blocking = {tuple(r[c] for c in ("System", "Backend", "Version", "Mode")) for r in diff.blocking}
    other = len(diff.changed) - len(diff.blocking) - len(diff.budget_differs)
    text = [f"{len(diff.blocking)} blocking, {len(diff.budget_differs)} between different GPU budgets, {other} other "
            f"status changes; {len(diff.added)} keys only in ours, {len(diff.removed)} only in {imported_label}."]
    budgets = [g for g in diff.budgets.get("old", []) if g is not None]
    if budgets and budgets != [ours_budget]:
        text.append(f"Not like with like: {imported_label}'s rows were checked with --total-gpus "
                    f"{', '.join(map(str, budgets))}, ours with one {ours_budget}-GPU replica; a status change between "
                    f"different budgets is never blocking (the model may not fit {ours_budget} GPUs): see why (ours).")
    changed = sorted(diff.changed, key=lambda r: (tuple(r[c] for c in ("System", "Backend", "Version", "Mode"))
                                                  not in blocking, r["System"], r["Backend"], r["Version"], r["Mode"]))
    category = {tuple(r[c] for c in ("System", "Backend", "Version", "Mode")): r["category"] for r in diff.blocking}
    category |= {tuple(r[c] for c in ("System", "Backend", "Version", "Mode")): "budget differs ({} → {} GPUs)".format(*r["gpus"])
                 for r in diff.budget_differs}
    rows, classes = [], []
    for r in changed:
        key = tuple(r[c] for c in ("System", "Backend", "Version", "Mode"))
        rows.append([r["HuggingFaceID"], *key, r["old"], r["new"], category.get(key, ""),
                     why.get((r["HuggingFaceID"], *key), "")])
        classes.append("blocking" if key in blocking else f"status-{r['new']}")
    return Section(f"Compare: {imported_label} → ours", text=text, legend=[("blocking", "blocking change")],
                   table=Table(["HuggingFaceID", "System", "Backend", "Version", "Mode", imported_label, "ours",
                                "blocking category", "why (ours)"], rows, row_classes=classes, filterable=True))


def matrix_page(label: str | None, frame: pl.DataFrame | None, models: list[str], labels: list[dict],
                ours: pl.DataFrame | None = None) -> Page:
    """Rows of the configured models (all rows when none is configured) from snapshot `label`, beside our
    built matrix `ours` when one is stored."""
    from perfledger.ledger.matrix.explain import reason_of
    from perfledger.ledger.matrix.rules import load_rules

    if frame is None or not frame.height:
        return Page("matrix", "Support matrix", [Section("Snapshot", text=[
            "No support-matrix snapshot is stored; add `matrices:` to the pipeline config or run "
            "`perfledger matrix import DIR --label L`."])], summary="no snapshot stored")
    rules = load_rules()
    passes, legacy = tuple(rules.pass_statuses), rules.legacy_pass_source

    def mine(f: pl.DataFrame) -> pl.DataFrame:
        f = f.filter(pl.col("HuggingFaceID").is_in(models)) if models else f
        return f.sort("System", "HuggingFaceID", "Backend", "Version", "Mode")

    rows = mine(frame)
    built = mine(ours) if ours is not None else None
    counts = rows.group_by("Status").len().sort("Status")
    sides = {label: rows, **({"ours": built} if built is not None else {})}
    budget = rules.replica_gpus
    sections = [Section(f"Snapshot {label}" + (" beside ours" if built is not None else ""), text=[
        f"{rows.height} rows for {', '.join(models) if models else 'every model'} in {label}"
        + (f", {built.height} in our built matrix (one {budget}-GPU replica per row)" if built is not None else "")
        + ". Each row's Command replays its check; `perfledger matrix explain MODEL` says why the two disagree."],
        legend=STATUS_LEGEND, table=status_counts(sides))]
    if built is not None:
        sections.append(compare_section(label, rows, built, budget))
    sections.append(Section("System × backend", text=["Status counts per system and backend over every version and mode"
                                                     + (f", {label} beside ours." if built is not None else ".")],
                            table=pivot(sides)))
    tabs = []
    for (system,), part in rows.group_by("System", maintain_order=True):
        cells = [[short_error(r["ErrMsg"]) if c == "Reason" and r["Status"] not in passes else
                  reason_of(r["Status"], r["ErrMsg"], r["Source"]) if c == "Reason" else
                  source_of(r, passes, legacy) if c == "Source" else r.get(c) for c in SHOWN]
                 for r in part.iter_rows(named=True)]
        tabs.append((system, Table(SHOWN, cells, row_classes=[f"status-{s}" for s in part["Status"]], filterable=True)))
    stored = Table(["label", "rows", "imported at", "source"],
                   [[snapshot[key] for key in ("label", "rows", "imported_at", "snapshot_source")] for snapshot in labels])
    sections += [Section(f"Rows per system ({label})", legend=STATUS_LEGEND, tabs=tabs),
                 Section("Stored snapshots", table=stored)]
    return Page("matrix", "Support matrix", sections,
                summary=f"snapshot {label}: {rows.height} rows, " + ", ".join(f"{s} {n}" for s, n in counts.iter_rows()))
