"""Ledger pages of the site: each model's final-state record, rendered by the ledger's own templates.

Reads the same record `perfledger ledger report` does (ledger/report.py: stored cells, events, decisions,
the latest imported matrix block and our built matrix when present) and renders HTML and Markdown; on the
site the HTML carries the site's nav bar and stylesheet (`site_nav` in the context).
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


def ledger_entries(wh, models: list[str]) -> list[dict]:
    """Index entries (slug, title, summary, cells, context) per model; rendered later by write_ledger_pages."""
    entries = []
    for model in models:
        context, cells = ledger_context(wh, model)
        t = context["totals"]
        entries.append({"slug": f"ledger-{model.replace('/', '-')}", "title": f"Ledger: {context['model']}",
                        "model": model, "cells": cells, "context": context,
                        "summary": f"{t['cells']} cells, {t['rows']} rows: done {t['done']}, partial {t['partial']}, "
                                   f"missing {t['missing']}, unexpected {t['unexpected']}"})
    return entries


def write_ledger_pages(entries: list[dict], out: Path, nav: list[tuple[str, str]]) -> None:
    """ledger-<model>.html/.md per entry; the HTML with the site's nav bar and stylesheet."""
    from perfledger.ledger.report import render
    from perfledger.safe_io import write_file

    for entry in entries:
        site = {**entry["context"], "site_nav": nav, "site_slug": entry["slug"]}
        write_file(out, f"{entry['slug']}.html", render(site, "html"))
        write_file(out, f"{entry['slug']}.md", render(entry["context"], "md"))
