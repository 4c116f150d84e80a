"""A model's ledger record (Markdown or HTML): its parts read from the warehouse, then rendered.

`perfledger ledger report` and the site's ledger pages both produce it, so both read the same parts
(stored events and decisions, the imported matrix block, our built matrix's disagreements) here.
Templates only loop and branch; every number comes from the context ledger/view.py assembles. HTML
output escapes every data string (Jinja autoescape); Markdown output neutralises markup in every value the
same way (`md_text` on every expression), and table cells also escape pipes and newlines.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from perfledger.ledger.decisions import ordered
from perfledger.ledger.matrix.explain import model_disagreements
from perfledger.ledger.matrix.store import SnapshotError, labels, read_snapshot
from perfledger.ledger.matrix.summary import model_block
from perfledger.ledger.record import stored_events
from perfledger.ledger.source import DECISIONS_TABLE, now_iso, read_or_empty
from perfledger.ledger.specs import ModelSpec
from perfledger.ledger.view import report_context

TEMPLATES = Path(__file__).with_name("templates")
FORMATS = {"md": "ledger.md.j2", "html": "ledger.html.j2"}
OURS_LABEL = "perfledger"  # the label our built matrix is stored under


def record_context(wh, spec: ModelSpec, cells: pl.DataFrame, as_of: str | None = None,
                   matrix_label: str | None = None, ours_label: str = OURS_LABEL) -> dict:
    """The report context of `spec`'s record over `cells`, with events and decisions up to `as_of`.

    The matrix block comes from snapshot `matrix_label` (default: the latest imported one; none stored
    leaves it out, a named one that is missing raises SnapshotError), and our built matrix `ours_label`
    is explained against it when stored.
    """
    events = stored_events(wh, spec.model)
    decisions = ordered(read_or_empty(wh, DECISIONS_TABLE), spec.model)
    if as_of is not None:
        events = events.filter(events["at"] <= as_of) if events.height else events
        decisions = [d for d in decisions if d["recorded_at"] <= as_of]
    matrix = ours = None
    try:
        label, frame = read_snapshot(wh, matrix_label)
        matrix = {"label": label, **model_block(frame, spec.model)}
        if ours_label != label and ours_label in labels(wh)["label"].to_list():
            ours = {"label": ours_label, "imported": label,
                    **model_disagreements(read_snapshot(wh, ours_label)[1], frame, spec.model)}
    except SnapshotError:
        if matrix_label is not None:
            raise
    return report_context(spec, cells, events, decisions, matrix, as_of, now_iso(), ours)


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
