"""The site and summary writers replace planted symlinks instead of writing through them, and the
Markdown twins of the ledger report and summary neutralise raw HTML from data as the HTML does."""

from pathlib import Path

import pytest

from perfledger.ledger.report import render
from perfledger.reports.summary import render_summary, write_summary
from perfledger.safe_io import UnsafeOutputError, check_output_folder, write_file

HOSTILE = "<img src=x onerror=alert(1)>&"


def test_write_file_replaces_a_planted_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "site"
    out.mkdir()
    (out / "index.html").symlink_to(victim)
    (out / ".index.html.partial").symlink_to(victim)  # the old fixed temp name, planted too
    write_file(out, "index.html", "<p>page</p>")
    assert victim.read_text() == "precious" and (out / "index.html").read_text() == "<p>page</p>"
    assert not (out / "index.html").is_symlink()


@pytest.mark.parametrize("name", ["../escape.html", "/etc/passwd"])
def test_write_file_refuses_names_leaving_the_folder(tmp_path: Path, name: str) -> None:
    with pytest.raises(UnsafeOutputError, match="escapes the output folder"):
        write_file(tmp_path, name, "x")


def test_a_symlinked_output_folder_inside_its_own_tree_is_fine(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert check_output_folder(tmp_path / "link") == tmp_path / "link"


def test_summary_is_written_through_the_safe_writer_and_escapes_errors(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "summary.md").symlink_to(victim)
    context = {"finished_at": "now", "seconds": 1.0, "warehouse": "wh", "sources": ["src"], "inventory_tables": 0,
               "inventory_slices": 0, "inventory_rows": 0, "tables": [], "ledgers": [],
               "ingest": {"batches": 1, "new_batches": 0, "rows_accepted": 0, "rows_quarantined": 0, "rows_duplicate": 0,
                          "failed_batches": [{"source": "s", "error": HOSTILE}]}}
    path = write_summary(tmp_path, context)
    assert victim.read_text() == "precious"
    text = path.read_text()
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;&amp;" in text
    assert text == render_summary(context)


def test_ledger_markdown_escapes_every_data_string(tmp_path: Path) -> None:
    from tests.ledger.test_report import context as context_fixture  # the real K3 context builder

    context = context_fixture.__wrapped__()
    cell = {**context["cells"][0], "kernel_sources": [HOSTILE], "date": HOSTILE, "date_source": HOSTILE}
    ctx = {**context, "title": HOSTILE, "systems": [HOSTILE], "findings": [{"category": HOSTILE, "text": HOSTILE}],
           "inventory": [cell, *context["inventory"][1:]]}
    text = render(ctx, "md")
    assert "<img" not in text and text.count("&lt;img src=x onerror=alert(1)&gt;&amp;") >= 6


def test_build_site_replaces_links_planted_in_the_output_folder(tmp_path: Path, published_site: dict) -> None:
    """Every page, twin, plot and stylesheet a rebuild writes replaces a symlink planted at its name."""
    from perfledger.reports.site import build_site

    root, out = published_site["out"].parent / "wh", tmp_path / "site"
    build_site(root, out, ["kimi-k3"], {})
    written = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    victim = tmp_path / "victim"
    victim.write_text("precious")
    for name in written:
        (out / name).unlink()
        (out / name).symlink_to(victim)
    build_site(root, out, ["kimi-k3"], {})
    assert victim.read_text() == "precious"
    assert all((out / name).is_file() and not (out / name).is_symlink() for name in written)
    assert {"index.html", "index.md", "site.css", "ledger-kimi-k3.html", "ledger-kimi-k3.md"} <= {str(n) for n in written}
    assert any(name.parts[0] == "plots" for name in written)  # files in a sub-folder too


def test_build_site_into_a_symlinked_folder_elsewhere_needs_explicit_consent(tmp_path: Path) -> None:
    from perfledger.reports.site import build_site

    elsewhere = tmp_path / "other-tree" / "site"
    elsewhere.mkdir(parents=True)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "site").symlink_to(elsewhere)
    with pytest.raises(UnsafeOutputError, match="is a symlink to .* outside"):
        build_site(tmp_path / "wh", tmp_path / "mine" / "site", [], {})
    assert not any(elsewhere.iterdir())
    build_site(tmp_path / "wh", tmp_path / "mine" / "site", [], {}, allow_symlinked_out=True)
    assert (elsewhere / "index.html").is_file()
