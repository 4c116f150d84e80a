"""The index's History sections read every stored version of the pipeline's tables (Delta time travel)."""

from __future__ import annotations

import polars as pl

from perfledger.reports.history import history_sections, ingest_totals, lane_rows, matrix_counts
from perfledger.warehouse.store import Warehouse


def _two_versions(wh: Warehouse) -> None:
    wh.write_table("batches", pl.DataFrame({"batch_id": ["b1"], "rows_accepted": [10], "rows_duplicate": [1]}))
    wh.write_table("batches", pl.DataFrame({"batch_id": ["b2"], "rows_accepted": [5], "rows_duplicate": [0]}))
    wh.write_table("ledger_cells", pl.DataFrame({"model": ["m", "other"], "lane": ["gemm", "gemm"], "rows": [3, 100]}))
    wh.write_table("ledger_cells", pl.DataFrame({"model": ["m"], "lane": ["moe"], "rows": [4]}), mode="overwrite")
    wh.write_table("support_matrix", pl.DataFrame({"HuggingFaceID": ["m", "m"], "label": ["ours", "ours"],
                                                   "Status": ["PASS", "FAIL"]}))


def test_each_version_counts_what_it_held(tmp_path) -> None:
    wh = Warehouse(tmp_path / "wh")
    _two_versions(wh)
    totals = {(r["version"], r["series"]): r["value"] for r in ingest_totals(wh)}
    assert totals == {(1, "batches"): 2, (1, "rows accepted"): 15, (1, "repeated keys"): 1,
                      (0, "batches"): 1, (0, "rows accepted"): 10, (0, "repeated keys"): 1}
    # the model filter applies per version; the overwrite's version no longer holds the gemm lane
    assert sorted((r["version"], r["lane"], r["rows"]) for r in lane_rows(wh, ["m"])) == [(0, "gemm", 3), (1, "moe", 4)]
    assert sorted((r["series"], r["rows"]) for r in matrix_counts(wh, ["m"])) == [("ours: FAIL", 1), ("ours: PASS", 1)]


def test_tables_never_written_give_no_section(tmp_path) -> None:
    wh = Warehouse(tmp_path / "wh")
    assert ingest_totals(wh) == [] and history_sections(wh, []) == []
    _two_versions(wh)
    titles = [s.title for s in history_sections(wh, ["m"])]
    assert titles == ["History: warehouse contents", "History: rows per lane", "History: support-matrix statuses"]
