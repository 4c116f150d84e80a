"""Ledger pages of the site: each model's final-state record, rendered by the ledger's own templates.

Reads the same record `perfledger ledger report` does (ledger/report.py: stored cells, events, decisions,
the latest imported matrix block and our built matrix when present) and renders HTML and Markdown.
"""

from __future__ import annotations

from pathlib import Path


def ledger_context(wh, model: str) -> tuple[dict, list[dict]]:
    """(report context, cells) for one model from the warehouse's ledger tables."""
    from perfledger.ledger.report import record_context
    from perfledger.ledger.specs import find_spec
    from perfledger.ledger.state import current_cells

    spec = find_spec(model)
    context = record_context(wh, spec, current_cells(wh, spec, record=False)[0])
    return context, context["cells"]


def write_ledger_pages(wh, models: list[str], out: Path) -> list[dict]:
    """ledger-<model>.html/.md per model; returns index entries (slug, title, summary, cells)."""
    from perfledger.ledger.report import render
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
