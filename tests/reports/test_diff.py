"""Warehouse diff logic on small frames (pure), and between two real table versions."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from perfledger.reports.diff import diff_frames, diff_page, table_diff
from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.store import Warehouse
from tests.flows.conftest import GEMM, scaled_copy

KEYS = ["system", "m"]


def _frame(ms: list[int], lat: list[float], system: str = "h200_sxm") -> pl.DataFrame:
    return pl.DataFrame({"system": [system] * len(ms), "m": ms, "latency": lat, "power": [1.0] * len(ms)})


def test_added_removed_changed_and_moves_above_threshold() -> None:
    old = _frame([1, 2, 3, 4], [1.0, 1.0, 1.0, 1.0])
    new = _frame([2, 3, 4, 5], [1.0, 1.04, 1.2, 9.0])
    result = diff_frames(old, new, KEYS, ["latency", "power"], "latency", 0.05)
    assert (result["added"], result["removed"], result["changed"]) == (1, 1, 2)
    assert result["moves"]["m"].to_list() == [4]
    assert abs(result["moves"]["move"][0] - 0.2) < 1e-12
    assert result["added_slices"] == {"h200_sxm": 1} and result["removed_slices"] == {"h200_sxm": 1}


def test_identical_frames_have_no_difference() -> None:
    frame = _frame([1, 2], [0.5, 0.7])
    result = diff_frames(frame, frame, KEYS, ["latency"], "latency")
    assert (result["added"], result["removed"], result["changed"], result["moves"].height) == (0, 0, 0, 0)


def test_real_table_versions(tmp_path: Path, shared_tree: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    ingest([str(shared_tree / GEMM / "0.24.0")], wh)
    ingest([str(scaled_copy(shared_tree, tmp_path / "slow", "0.24.0", 1.1))], wh)
    ingest([str(shared_tree / GEMM / "0.22.0")], wh)
    changed = table_diff(wh, "gemm_perf", 0, 1)
    assert (changed["added"], changed["removed"], changed["changed"]) == (0, 0, 107225)
    assert changed["moves"].height == 107225
    appended = table_diff(wh, "gemm_perf", 1, 2)
    assert appended["added"] == 65268 and appended["changed"] == 0
    assert appended["added_slices"] == {"h200_sxm/vllm/0.22.0": 65268}
    page = diff_page([appended])
    assert page.sections[0].table.rows == [["gemm_perf", 1, 2, 65268, 0, 0, 0]]
    # Counts in prose use the site's one number format, as the tables do.
    assert page.sections[1].text == ["65,268 added, 0 removed, 0 changed; 0 rows moved more than 5% in latency."]
    assert page.summary == "1 tables changed by the latest ingest; 65,268 rows added, 0 removed, 0 changed"


def test_diff_cli_between_versions(tmp_path: Path, shared_tree: Path) -> None:
    import json

    from typer.testing import CliRunner

    from perfledger.cli import app

    wh = Warehouse(tmp_path / "wh")
    ingest([str(shared_tree / GEMM / "0.24.0")], wh)
    ingest([str(scaled_copy(shared_tree, tmp_path / "slow", "0.24.0", 1.02))], wh)
    result = CliRunner().invoke(app, ["diff", "gemm_perf", "--from", "0", "--warehouse", str(wh.root), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"table": "gemm_perf", "from": 0, "to": 1, "added": 0, "removed": 0,
                                         "changed": 107225, "added_slices": {}, "removed_slices": {}, "moves": 0}
    missing = CliRunner().invoke(app, ["diff", "gemm_perf", "--from", "7", "--warehouse", str(wh.root)])
    assert missing.exit_code == 1 and "gemm_perf: no version 7; valid versions are 0..1" in missing.output
