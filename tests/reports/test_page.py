"""Page rendering: every data string is HTML-escaped; Markdown cells escape pipes and newlines."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from markupsafe import escape

from perfledger.reports.page import Page, Section, Table, fmt, render_page

NAV = [("index", "Home"), ("matrix", "Support matrix")]


def _page(text: str) -> Page:
    return Page("matrix", text, [Section(text, text=[text], table=Table([text], [[text]], row_classes=["status-PASS"]),
                                         tabs=[(text, Table(["c"], [[text]]))], links=[("x.html", text)])], summary=text)


def test_markup_in_data_is_escaped_in_html_and_md() -> None:
    evil = '<script>alert("x")</script> | a\nb'
    out = render_page(_page(evil), NAV, "html")
    assert "<script>alert" not in out and f"<td>{escape(evil)}</td>" in out
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in out
    md = render_page(_page(evil), NAV, "md")
    assert '| &lt;script&gt;alert("x")&lt;/script&gt; \\| a b |' in md and "<script" not in md


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=40))
def test_any_cell_text_appears_only_escaped(text: str) -> None:
    out = render_page(_page(text), NAV, "html")
    if any(c in text for c in "<>&\"'"):
        assert f"<td>{text}</td>" not in out
    assert f"<td>{escape(text)}</td>" in out


def test_md_links_point_at_md_twins_and_numbers_are_compact() -> None:
    md = render_page(Page("index", "t", [Section("s", links=[("ledger-kimi-k3.html", "ledger")])]), NAV, "md")
    assert "[ledger](ledger-kimi-k3.md)" in md
    assert (fmt(0.123456789), fmt(None), fmt([1, 2.5]), fmt(12)) == ("0.1235", "", "1, 2.5", "12")
