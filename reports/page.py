"""The site's page model: a page is sections of text, tables, tabbed tables and images.

Every page renders twice from the same data: HTML (Jinja autoescape: every data string escaped) and
a Markdown twin for review in git (table cells escaped by `md_cell`). Builders only assemble data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from perfledger.ledger.report import md_cell, md_text

TEMPLATES = Path(__file__).with_name("templates")


@dataclass
class Table:
    columns: list[str]
    rows: list[list]
    row_classes: list[str] = field(default_factory=list)  # CSS class per row (status colours)
    filterable: bool = False
    note: str = ""                                         # e.g. "first 200 of 5301 rows"


@dataclass
class Section:
    title: str
    text: list[str] = field(default_factory=list)
    table: Table | None = None
    tabs: list[tuple[str, Table]] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)  # (relative path, alt text)
    links: list[tuple[str, str]] = field(default_factory=list)   # (relative href, label)
    legend: list[tuple[str, str]] = field(default_factory=list)  # (row CSS class, meaning) of the colours used


@dataclass
class Page:
    slug: str       # file stem: <slug>.html and <slug>.md
    title: str
    sections: list[Section]
    summary: str = ""  # one line for the index


def fmt(value: object) -> str:
    """Numbers as a reader wants them in a table, one format on every page: whole numbers with thousands
    separators, floats to 4 significant digits (never an exponent from 1 up), None as blank."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:  # NaN
            return ""
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt(v) for v in value)
    return str(value)


def is_number(value: object) -> bool:
    """A cell rendered right-aligned (td.num)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


LONG_TEXT = 48  # characters: a cell longer than this wraps (between words); shorter ones never wrap


def is_long_text(value: object) -> bool:
    return isinstance(value, str) and len(value) > LONG_TEXT


def md_safe(value: object) -> str:
    """A Markdown table cell: pipes/newlines escaped (md_cell) and markup neutralised, as in the HTML."""
    return md_text(md_cell(value))


def tab_id(name: str) -> str:
    return "tab-" + "".join(c if c.isalnum() else "-" for c in name)


def _environment(html: bool) -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=html, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(md=md_safe, text=md_text, fmt=fmt, tab_id=tab_id)
    env.tests.update(number=is_number, long_text=is_long_text)
    return env


def render_page(page: Page, nav: list[tuple[str, str]], fmt_name: str) -> str:
    """The page as `html` or `md`; `nav` is (slug, title) of every page for the site menu."""
    if fmt_name not in ("html", "md"):
        raise ValueError(f"format {fmt_name!r}: expected html or md")
    template = _environment(fmt_name == "html").get_template(f"page.{fmt_name}.j2")
    return template.render(page=page, nav=nav)
