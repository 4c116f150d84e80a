"""Ledger pages of the site: each model's final-state record, rendered by the ledger's own templates.

Assembles the same context `perfledger ledger report` does (stored cells, events, decisions, the
latest imported matrix block and our built matrix when present) and renders HTML and Markdown.
"""

from __future__ import annotations

from pathlib import Path


def ledger_context(wh, model: str) -> tuple[dict, list[dict]]:
    """(report context, cells) for one model from the warehouse's ledger tables."""
    from perfledger.ledger.decisions import ordered
    from perfledger.ledger.matrix.compare import model_disagreements
    from perfledger.ledger.matrix.store import SnapshotError, labels, read_snapshot
    from perfledger.ledger.matrix.summary import model_block
    from perfledger.ledger.record import stored_events
    from perfledger.ledger.source import DECISIONS_TABLE, now_iso, read_or_empty
    from perfledger.ledger.specs import find_spec
    from perfledger.ledger.state import current_cells
    from perfledger.ledger.view import report_context

    spec = find_spec(model)
    cells = current_cells(wh, spec, record=False)[0]
    matrix = ours = None
    try:
        label, frame = read_snapshot(wh)
        matrix = {"label": label, **model_block(frame, spec.model)}
        if "perfledger" != label and "perfledger" in labels(wh)["label"].to_list():
            ours = {"label": "perfledger", "imported": label,
                    **model_disagreements(read_snapshot(wh, "perfledger")[1], frame, spec.model)}
    except SnapshotError:
        pass
    context = report_context(spec, cells, stored_events(wh, spec.model),
                             ordered(read_or_empty(wh, DECISIONS_TABLE), spec.model), matrix, None, now_iso(), ours)
    return context, context["cells"]


def write_ledger_pages(wh, models: list[str], out: Path) -> list[dict]:
    """ledger-<model>.html/.md per model; returns index entries (slug, title, summary, cells)."""
    from perfledger.reports.ledger_report import render
    from perfledger.safe_io import write_file

    entries = []
    for model in models:
        context, cells = ledger_context(wh, model)
        slug = f"ledger-{model.replace('/', '-')}"
        for fmt in ("html", "md"):
            write_file(out, f"{slug}.{fmt}", render(context, fmt))
        t = context["totals"]
        entries.append({"slug": slug, "title": f"Ledger: {context['model']}", "model": model, "cells": cells,
                        "summary": f"{t['cells']} cells, {t['rows']} rows: done {t['done']}, partial {t['partial']}, "
                                   f"missing {t['missing']}, unexpected {t['unexpected']}"})
    return entries
