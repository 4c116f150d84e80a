"""`perfledger export aic`: ingest a published tree, export it, and get the same tree back file by file.

Equal means: every data file present, Parquet files equal in schema (types incl. large_string, schema
metadata), rows in order and codec; YAML/JSON sidecars byte for byte (pyarrow stamps its own version into
a Parquet footer, so Parquet bytes can only match when the same pyarrow wrote both).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.warehouse.export import export_aic
from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.store import Warehouse
from tests.warehouse.tree_compare import compare_trees, same_file

pytestmark = pytest.mark.aic

# Real folders that between them hold every quirk the export must restore: custom_allreduce's `backend`
# column, DeepEP's microsecond tables, legacy nccl without descriptive columns, repeated measurements
# (nccl 2.26.2), lowercase and mixed-case framework labels, large_string / pandas-metadata / SNAPPY files,
# boolean columns, and a version folder that only declares reuse.
SHARED_FOLDERS = ["h200_sxm/comm", "l40s/moe/sglang/0.5.12", "b200_sxm/moe/sglang/0.5.16", "h200_sxm/gemm/sglang/0.5.12"]
WHEEL_ERRORS_FOLDER = "h200_sxm/comm/trtllm/1.3.0rc11"  # a collector errors file beside the table


@pytest.fixture
def wheel_data(aic_core) -> Path:
    return Path(aic_core.__file__).parent / "systems" / "data"


def test_export_gives_back_the_ingested_folders_file_by_file(tmp_path: Path, shared_tree: Path, wheel_data: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    report = ingest([str(shared_tree / f) for f in SHARED_FOLDERS], wh)
    assert not report.failed_batches and report.rows_duplicate > 0
    out = tmp_path / "out"
    result = export_aic(wh, out)
    total, problems = compare_trees(shared_tree, out / "data", SHARED_FOLDERS)
    assert total > 20 and problems == {}
    assert result["exact_files"] == result["files"]
    assert {"h200_sxm.yaml", "l40s.yaml", "b200_sxm.yaml", "attention_lane_defaults.yaml"} <= set(result["systems"])
    assert (out / "h200_sxm.yaml").read_bytes() == (wheel_data.parent / "h200_sxm.yaml").read_bytes()


def test_errors_files_come_back_and_a_tampered_export_is_caught(tmp_path: Path, wheel_data: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    ingest([str(wheel_data / WHEEL_ERRORS_FOLDER)], wh)
    out = tmp_path / "out"
    runner = CliRunner().invoke(app, ["export", "aic", str(out), "--warehouse", str(wh.root), "--json"])
    assert runner.exit_code == 0, runner.output
    assert json.loads(runner.stdout)["sidecars_as_received"] == 2
    total, problems = compare_trees(wheel_data, out / "data", [WHEEL_ERRORS_FOLDER])
    assert total == 3 and problems == {}
    # The yardstick itself: rows out of order and another codec are each a difference.
    exported = out / "data" / WHEEL_ERRORS_FOLDER / "moe_a2a_perf.parquet"
    table = pq.read_table(exported)
    for name, changed, codec in [("reversed", table.take(list(range(table.num_rows - 1, -1, -1))), "zstd"),
                                 ("codec", table, "gzip")]:
        pq.write_table(changed, tmp_path / f"{name}.parquet", compression=codec)
        assert same_file(exported, tmp_path / f"{name}.parquet") is not None, name


@pytest.mark.slow
def test_whole_wheel_round_trip(tmp_path: Path, wheel_data: Path) -> None:
    """Every file of the wheel's perf database back from the warehouse (about 4 minutes on 2 shared cores)."""
    wh = Warehouse(tmp_path / "wh")
    assert not ingest(["aic-package"], wh).failed_batches
    out = tmp_path / "out"
    result = export_aic(wh, out)
    total, problems = compare_trees(wheel_data, out / "data")
    assert total == 736 + 468 + 6 and problems == {}
    assert result["exact_files"] == result["files"] == 736
