"""Render a model's ledger record (Markdown or HTML) from the context ledger/view.py assembles.

Templates only loop and branch; every number comes from the context. HTML output escapes every data
string (Jinja autoescape); Markdown output neutralises markup in every value the same way (`md_text`
on every expression), and table cells also escape pipes and newlines.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

TEMPLATES = Path(__file__).with_name("templates")
FORMATS = {"md": "ledger.md.j2", "html": "ledger.html.j2"}


def md_cell(value: object) -> str:
    """A value safe inside a Markdown table cell."""
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def md_text(value: object) -> str:
    """Markdown prose: a data string's angle brackets and ampersands cannot become live HTML."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cell_notes(cell: dict) -> list[str]:
    """Short derived notes for the inventory table."""
    notes = []
    if cell["status"] != "done":
        notes.append(cell["status"])
    if cell["dtype_rows"] and len(cell["dtype_rows"]) > 1:
        notes.append(" + ".join(cell["dtype_rows"]))
    elif cell["dtypes"]:
        notes.append(", ".join(cell["dtypes"]))
    if cell["phases"]:
        notes.append("phases " + "/".join(cell["phases"]))
    if cell["claim"] is not None and cell["claim"] != cell["rows"]:
        notes.append(f"claim {cell['claim']}")
    if cell["meta_status"] and cell["meta_status"] != "complete":
        notes.append(f"meta {cell['meta_status']}")
    if cell.get("failed_cases"):
        notes.append(f"{cell['failed_cases']} failed cases")
    if cell["suffix_violations"]:
        notes.append(f"{cell['suffix_violations']} rows missing the suffix")
    return notes


def _environment(fmt: str) -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=(fmt == "html"), undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                      finalize=md_text if fmt == "md" else None)
    env.filters.update(md=md_cell, cell_notes=cell_notes)
    return env


def render(context: dict, fmt: str) -> str:
    """The ledger document in `fmt` ("md" or "html")."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    return _environment(fmt).get_template(FORMATS[fmt]).render(**context)
