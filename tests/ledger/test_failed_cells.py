"""Collector failures reach the ledger: a lane cell whose every case failed is `failed`, not `missing`."""

from __future__ import annotations

import json
from pathlib import Path

from perfledger.ledger.source import build_cells
from perfledger.ledger.specs import find_spec
from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.store import Warehouse


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
    by_system = dict(zip(kda["system"], kda["status"], strict=True))
    assert by_system["b200_sxm"] == "failed" and by_system["h200_sxm"] == "missing"
    assert kda.filter(kda["system"] == "b200_sxm")["failed_cases"].to_list() == [3]


def test_ledger_events_catch_up_after_an_ingest_that_skipped_the_hook(tmp_path: Path, shared_tree: Path) -> None:
    """A run killed between its `batches` commit and the ledger hook loses no events: the next ingest,
    even one with nothing new, hands the unprocessed batch to the hook."""
    from perfledger.ledger.hooks import on_ingest
    from perfledger.ledger.record import stored_events

    warehouse = Warehouse(tmp_path / "wh")
    source = str(shared_tree / "b200_sxm" / "kda" / "sglang" / "0.5.16")
    first = ingest([source], warehouse)  # as if killed before the hook ran
    assert first.new_batches == 1 and stored_events(warehouse, "moonshotai/Kimi-K3").height == 0
    again = ingest([source], warehouse, on_commit=on_ingest)
    assert again.new_batches == 0
    events = stored_events(warehouse, "moonshotai/Kimi-K3")
    assert events.height >= 1
    assert all(first.batch_ids[0] in ids for ids in events["batch_ids"].to_list())
    versions = {name: warehouse.table_version(name) for name in ("ledger_events", "ledger_hook_batches")}
    ingest([source], warehouse, on_commit=on_ingest)  # nothing pending: nothing written
    assert {name: warehouse.table_version(name) for name in versions} == versions
