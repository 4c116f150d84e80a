"""Collector failures and our-vs-imported matrix reasons in the rendered report and in `ledger build --json`.

Real data throughout: K3 lane rows from ../shared, collector failures ingested as error records, our
matrix built by the real estimator over h200 vLLM 0.24.0 from ../shared, the imported head-095f58a matrix.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.estimator.data.system_specs import load_spec
from perfledger.ledger.cells import derive_cells
from perfledger.ledger.matrix.build import build_rows
from perfledger.ledger.matrix.explain import model_disagreements
from perfledger.ledger.matrix.reader import read_matrix
from perfledger.ledger.matrix.summary import model_block
from perfledger.ledger.report import render
from perfledger.ledger.source import read_meta
from perfledger.ledger.specs import find_spec
from perfledger.ledger.view import report_context
from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.store import Warehouse
from tests.ledger.curated import (
    MATRIX_STATES,
    SHARED_DATA,
    check_golden,
    read_tree_table,
)

pytestmark = pytest.mark.xdist_group("ledger-test_report_failures")

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "ledger"
K3 = find_spec("kimi-k3")
FOLDERS = ["gemm/vllm/0.24.0", "moe/vllm/0.24.0", "mla_bmm/vllm/0.24.0", "attention/vllm/0.24.0", "comm/vllm/0.24.0"]


def failed_batch(root: Path, system: str, backend: str, version: str, table: str, cases: int) -> Path:
    """A collector output folder holding only failure records (every case of it failed)."""
    out = root / f"{system}-{backend}-{version}-{table}"
    out.mkdir(parents=True)
    (out / "batch.yaml").write_text(f"system: {system}\nbackend: {backend}\nversion: \"{version}\"\n")
    records = [{"table": table, "op": table.removesuffix("_perf"), "task_id": f"{table}:{i}", "classification": "oom",
                "message": "CUDA out of memory"} for i in range(cases)]
    (out / f"errors_{backend}.{table.removesuffix('_perf')}.json").write_text(json.dumps(records))
    return out


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Warehouse:
    root = tmp_path_factory.mktemp("wh-failures")
    wh = Warehouse(root / "wh")
    failures = [failed_batch(root, "l40s", "vllm", "0.24.0", "moe_perf", 5),        # expected, never collected
                failed_batch(root, "b200_sxm", "sglang", "0.5.14", "moe_perf", 2)]  # collected, 2 cases crashed
    report = ingest([*map(str, failures), *(str(SHARED_DATA / "h200_sxm" / f) for f in FOLDERS)], wh)
    assert not report.failed_batches
    return wh


@pytest.fixture(scope="module")
def context(warehouse):
    from perfledger.estimator.batch import estimate
    from perfledger.estimator.data.sources import WarehouseSource
    from perfledger.estimator.session import Estimator

    cells = derive_cells(K3, {t: read_tree_table(SHARED_DATA, t) for t in dict.fromkeys(lane.table for lane in K3.lanes)},
                         read_meta(warehouse))
    head = read_matrix(MATRIX_STATES / "head-095f58a")
    est = Estimator(WarehouseSource(warehouse.root))
    lane_rows = {(c["lane"], c["system"], c["backend"], c["version"]): c["rows"] for c in cells.iter_rows(named=True)}
    ours = build_rows(K3, [("h200_sxm", "vllm", "0.24.0")], lambda op, q, mode: estimate(est, op, q, mode=mode),
                      {"h200_sxm": load_spec("h200_sxm").flops}, lane_rows)
    matrix = {"label": "head-095f58a", **model_block(head, K3.model)}
    explained = {"label": "perfledger", "imported": "head-095f58a", **model_disagreements(ours, head, K3.model)}
    return report_context(K3, cells, pl.DataFrame(), [], matrix, None, "2026-12-01T00:00:00+00:00", explained)


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_golden(context, fmt):
    check_golden(render(context, fmt), GOLDEN / f"kimi-k3-failures.{fmt}")


def test_failed_cells_show_in_the_inventory(context):
    text = render(context, "md")
    assert "| moe.k3 | l40s | vllm 0.24.0 |" in text
    line = next(row for row in text.splitlines() if row.startswith("| moe.k3 | l40s | vllm 0.24.0 |"))
    assert "failed" in line and "5 failed cases" in line
    line = next(row for row in text.splitlines() if row.startswith("| moe.k3 | b200_sxm | sglang 0.5.14 |"))
    assert "| 6156 |" in line and "2 failed cases" in line


def test_matrix_explanation_counts_keys_by_reason(context):
    by_reason = context["ours"]["by_reason"]
    assert sum(r["keys"] for r in by_reason) == (len(context["ours"]["disagree"]) + context["ours"]["only_imported"]
                                                 + context["ours"]["only_ours"])
    text = render(context, "md")
    assert "Disagreements by reason:" in text and "| 234 | only imported |" in text


def test_build_json_carries_failed_cases(warehouse):
    result = CliRunner().invoke(app, ["ledger", "build", "kimi-k3", "--warehouse", str(warehouse.root), "--no-record",
                                      "--json"])
    assert result.exit_code == 0, result.stdout
    cells = {(c["lane"], c["system"], c["backend"], c["version"]): c for c in json.loads(result.stdout)["cells"]}
    failed = cells[("moe.k3", "l40s", "vllm", "0.24.0")]
    assert (failed["status"], failed["rows"], failed["failed_cases"]) == ("failed", 0, 5)
    assert cells[("moe.k3", "h200_sxm", "vllm", "0.24.0")]["failed_cases"] == 0  # its batch had no failures
