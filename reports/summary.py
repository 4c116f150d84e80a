"""The run summary: a short Markdown page of what the main job ingested and derived."""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from perfledger.ledger.report import md_text
from perfledger.safe_io import write_file

TEMPLATES = Path(__file__).with_name("templates")


def render_summary(context: dict) -> str:
    """Render the summary from plain data (counts, inventory, ledger cells); no warehouse access here."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined, autoescape=False,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, finalize=md_text)
    return env.get_template("summary.md.j2").render(**context)


def write_summary(out_dir: Path, context: dict) -> Path:
    """Write summary.md atomically (a reader never sees half a file; a planted symlink is replaced)."""
    return write_file(out_dir, "summary.md", render_summary(context))
