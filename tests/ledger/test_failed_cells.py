"""Collector failures reach the ledger: a lane cell whose every case failed is `failed`, not `missing`."""

from __future__ import annotations

import json
from pathlib import Path

from ledger.source import build_cells
from ledger.specs import find_spec
from warehouse.ingest import ingest
from warehouse.store import Warehouse


def test_a_cell_attempted_and_failed_differs_from_one_never_attempted(tmp_path: Path) -> None:
    out = tmp_path / "b200_sxm"
    out.mkdir()
    (out / "batch.yaml").write_text("system: b200_sxm\nbackend: sglang\nversion: 0.5.16\n")
    records = [{"table": "kda_perf", "op": "kda", "task_id": f"kda:{i}", "classification": "oom",
                "message": "CUDA out of memory"} for i in range(3)]
    (out / "errors_sglang.kda.json").write_text(json.dumps(records))
    warehouse = Warehouse(tmp_path / "wh")
    report = ingest([str(out)], warehouse)
    assert report.failed_batches == []
    assert warehouse.read_table("collection_failures").height == 3
    cells = build_cells(warehouse, find_spec("kimi-k3"))
    kda = cells.filter((cells["lane"] == "kda") & (cells["backend"] == "sglang"))
    by_system = dict(zip(kda["system"], kda["status"]))
    assert by_system["b200_sxm"] == "failed" and by_system["h200_sxm"] == "missing"
    assert kda.filter(kda["system"] == "b200_sxm")["failed_cases"].to_list() == [3]
