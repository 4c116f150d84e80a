"""Ledger report rendering: golden Markdown/HTML from real ../shared data, and HTML escaping."""

from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from perfledger.ledger.cells import derive_cells
from perfledger.ledger.decisions import make_decision
from perfledger.ledger.events import derive_events
from perfledger.ledger.matrix.reader import read_matrix
from perfledger.ledger.matrix.summary import model_block
from perfledger.ledger.report import md_cell, render
from perfledger.ledger.specs import find_spec
from perfledger.ledger.view import report_context
from tests.ledger.curated import (
    MATRIX_STATES,
    SHARED_DATA,
    check_golden,
    read_tree_table,
)

pytestmark = pytest.mark.xdist_group("ledger-test_report")

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "ledger"
K3 = find_spec("kimi-k3")


@pytest.fixture(scope="module")
def context():
    cells = derive_cells(K3, {t: read_tree_table(SHARED_DATA, t) for t in dict.fromkeys(lane.table for lane in K3.lanes)})
    earlier = cells.with_columns(pl.when(pl.col("system") == "l40s").then(pl.col("rows") + 22).otherwise(pl.col("rows"))
                                 .alias("rows"))
    events = pl.concat([derive_events(pl.DataFrame(), earlier, ["b0"], "2026-08-01T00:00:00+00:00"),
                        derive_events(earlier, cells, ["b1"], "2026-08-04T00:00:00+00:00")])
    decisions = make_decision(K3, "2026-08-04", "Prune the h12 decode rows on l40s | keep fallback", "kda",
                              "2026-12-01T00:00:00+00:00").to_dicts()
    matrix = {"label": "head-095f58a", **model_block(read_matrix(MATRIX_STATES / "head-095f58a"), K3.model)}
    return report_context(K3, cells, events, decisions, matrix, None, "2026-12-01T00:00:00+00:00")


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_golden(context, fmt):
    check_golden(render(context, fmt), GOLDEN / f"kimi-k3.{fmt}")


def test_numbers_come_from_the_data(context):
    text = render(context, "md")
    assert "| moe.k3 | b200_sxm | sglang 0.5.14 |" in text and "| 6156 |" in text
    assert "kda l40s sglang 0.5.16: prune 1096 → 1074 (22 rows removed" in text
    assert "Snapshot `head-095f58a`: 236 rows for this model; union of keys in the snapshot: 244." in text
    assert "Prune the h12 decode rows on l40s \\| keep fallback" in text


def test_html_escapes_every_data_string(context):
    hostile = "<script>alert(1)</script>"
    spec = replace(K3, title=hostile, findings=({"category": hostile, "text": hostile},))
    ctx = {**context, "title": spec.title, "findings": list(spec.findings),
           "cells": [{**context["cells"][0], "kernel_sources": [hostile]}, *context["cells"][1:]]}
    page = render(ctx, "html")
    assert "<script>" not in page and page.count("&lt;script&gt;") >= 4


def test_md_cell_escapes_pipes_and_newlines():
    assert md_cell("a|b\nc") == "a\\|b c"
    assert md_cell(None) == ""
    with pytest.raises(ValueError, match="format 'pdf'"):
        render({}, "pdf")


def test_every_inventory_date_names_its_source() -> None:
    """collection_meta's date is `collected`; a cell without one shows its ingest day as `ingested`, never unmarked."""
    import polars as pl

    from perfledger.ledger.view import inventory

    base = {"lane": "kda", "backend": "vllm", "version": "1", "rows": 1, "kernel_sources": [], "dtypes": [],
            "dtype_rows": [], "phases": [], "status": "done", "claim": None, "meta_status": None, "suffix_violations": 0}
    cells = pl.DataFrame([{**base, "system": "a", "meta_collected_at": "2026-07-28T10:00:00", "last_ingest": "2026-12-01"},
                          {**base, "system": "b", "meta_collected_at": None, "last_ingest": "2026-12-01T09:00:00"},
                          {**base, "system": "c", "meta_collected_at": None, "last_ingest": None, "rows": 0}])
    shown = {r["system"]: (r["date"], r["date_source"]) for r in inventory(cells)}
    assert shown == {"a": ("2026-07-28", "collected"), "b": ("2026-12-01", "ingested"), "c": ("", "")}
