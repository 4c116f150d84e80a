"""The commit protocol: an ingest is all-or-nothing across every table it touches.

Faults are injected through the storage layer's write seam (`Warehouse.write_observer`), at every
write step of a real ingest in turn; the warehouse must then equal its prior state (every table's
rows and version, the raw input copies), and a re-run must equal a clean ingest.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from deltalake import DeltaTable

from perfledger.ledger.hooks import on_ingest
from perfledger.settings import ObjectLocation, location
from perfledger.warehouse import objects
from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.journal import JOURNAL_NAME, journal_path
from perfledger.warehouse.lock import run_lock
from perfledger.warehouse.store import Warehouse, WarehouseError
from tests.flows.reliability_worker import table_versions
from tests.warehouse.conftest import GEMM_HEADER, H200_VLLM, gemm_frame, gemm_line, write_staging, write_tree_table

VOLATILE = ("ingested_at", "started_at", "finished_at", "processed_at", "first_ingest", "last_ingest", "at")


class InjectedFault(RuntimeError):
    """The write the test chose to fail."""


def physical_state(root: Path | str) -> dict[str, object]:
    """Every Delta table at its newest log version (journal ignored) with its rows, plus the raw copies;
    `root` is a folder or an object-store URI."""
    place = location(root)
    state: dict[str, object] = {}
    for name in table_versions(root):
        table = DeltaTable(str(place / name), storage_options=Warehouse(place).storage_options)
        frame = pl.from_arrow(table.to_pyarrow_table())
        frame = frame.drop([c for c in VOLATILE if c in frame.columns])
        frame = frame.select(sorted(frame.columns))
        state[name] = (table.version(), frame.sort(frame.columns).rows())
    if isinstance(place, ObjectLocation):
        state["raw"] = sorted(key for key, _ in objects.listing(place / "raw"))
        state["journal"] = objects.read(place / JOURNAL_NAME) is not None
        return state
    raw = place / "raw"
    state["raw"] = sorted(str(p.relative_to(raw)) for p in raw.rglob("*")) if raw.is_dir() else []
    state["journal"] = journal_path(place).exists()
    return state


def _first_run(tmp: Path) -> list[str]:
    tree = tmp / "tree"
    frame = gemm_frame([1, 1, 2, 3], [0.1, 0.2, 0.3, -1.0]).with_columns(
        pl.Series("gemm_dtype", ["fp8", "fp8", "fp8", "mystery"]))  # a repeat, a quarantined row, an advisory
    write_tree_table(tree, "h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet", frame)
    (tree / "h200_sxm/gemm/sglang/0.5.14/reuse.yaml").write_text(
        "reuse:\n- {table: gemm_perf, from_version: 0.5.12, reason: same kernels, approved_by: a}\n")
    staging = write_staging(tmp / "out", "gemm_perf", GEMM_HEADER, [gemm_line(1), gemm_line(2, "abc")], batch=H200_VLLM)
    (staging / "errors_vllm.gemm.json").write_text('[{"table": "gemm_perf", "task_id": 1, "message": "oom"}]')
    return [str(tree), str(staging)]


def _second_run(tmp: Path) -> list[str]:
    """Replaces a slice, adds a slice with an extra column, and a staging batch with checkpoint failures."""
    tree = tmp / "tree2"
    write_tree_table(tree, "h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet", gemm_frame([1, 2, 2], [0.5, 0.6, 0.9]))
    (tree / "h200_sxm/gemm/sglang/0.5.14/reuse.yaml").write_text(
        "reuse:\n- {table: gemm_perf, from_version: 0.5.13, reason: re-measured, approved_by: b}\n")
    wider = gemm_frame([4, 5], [0.2, -0.1]).with_columns(pl.Series("power", [300.0, 310.0]), pl.Series("note", ["x", "y"]))
    write_tree_table(tree, "h100_sxm/gemm/sglang/0.5.14/gemm_perf.parquet", wider)
    staging = write_staging(tmp / "out2", "gemm_perf", GEMM_HEADER, [gemm_line(7)], batch=H200_VLLM | {"version": "0.21.0"})
    checkpoint = staging / "collector_checkpoint" / "vllm"
    checkpoint.mkdir(parents=True)
    (checkpoint / "vllm.gemm.json").write_text('{"table": "gemm_perf", "module": "vllm.gemm", "failed": ["a", "b"]}')
    return [str(tree), str(staging)]


def _failing_at(step: int):
    seen = []

    def observer(target: Path) -> None:
        seen.append(target)
        if len(seen) == step:
            raise InjectedFault(f"write {step} ({target.name}) failed")
    return observer, seen


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("unit")
    prior = tmp / "prior"
    assert ingest(_first_run(tmp), Warehouse(prior), on_commit=on_ingest).failed_batches == []
    second = _second_run(tmp)
    clean = tmp / "clean"
    shutil.copytree(prior, clean)
    counting = Warehouse(clean)
    counting.write_observer, writes = _failing_at(0)
    report = ingest(second, counting, on_commit=on_ingest)
    assert report.failed_batches == [] and report.new_batches == 3
    return {"tmp": tmp, "prior": prior, "second": second, "clean": physical_state(clean), "writes": len(writes),
            "prior_state": physical_state(prior)}


def test_the_second_ingest_touches_every_table(runs) -> None:
    tables = {k for k in runs["clean"] if k not in ("raw", "journal")}
    assert tables >= {"batches", "batch_tables", "quarantine", "advisories", "duplicates", "reuse", "collection_failures",
                      "curated/gemm_perf", "ledger_hook_batches"}
    assert runs["writes"] >= 10


def test_a_fault_at_any_write_leaves_the_prior_state_and_a_rerun_equals_a_clean_ingest(runs) -> None:
    for step in range(1, runs["writes"] + 1):
        root = runs["tmp"] / f"fault{step}"
        shutil.copytree(runs["prior"], root)
        warehouse = Warehouse(root)
        warehouse.write_observer, _ = _failing_at(step)
        with pytest.raises(InjectedFault):
            ingest(runs["second"], warehouse, on_commit=on_ingest)
        assert physical_state(root) == runs["prior_state"], f"fault at write {step} left a trace"
        assert ingest(runs["second"], Warehouse(root), on_commit=on_ingest).new_batches == 3
        assert physical_state(root) == runs["clean"], f"re-run after a fault at write {step} differs from a clean ingest"
        shutil.rmtree(root)


def test_readers_see_an_open_unit_only_once_it_commits_and_a_crash_is_rolled_back(runs, tmp_path: Path) -> None:
    root = tmp_path / "wh"
    shutil.copytree(runs["prior"], root)
    writer, reader = Warehouse(root), Warehouse(root)
    before = reader.read_table("batches").height
    unit = writer.unit()
    unit.__enter__()  # the writer "crashes" inside the unit: the block is never left
    writer.write_table("batches", reader.read_table("batches").head(1))
    writer.write_table("brand_new", pl.DataFrame({"a": [1]}))
    assert writer.read_table("batches").height == before + 1
    assert reader.read_table("batches").height == before and not reader.has_table("brand_new")
    assert reader.latest_commit("batches") == runs["prior_state"]["batches"][0]
    with run_lock(root):  # the next writer rolls the abandoned unit back
        pass
    assert physical_state(root) == runs["prior_state"]


def test_a_slice_gaining_a_column_does_not_block_replacing_another(tmp_path: Path, warehouse: Warehouse) -> None:
    tree = tmp_path / "tree"
    wider = gemm_frame([1]).with_columns(pl.lit(1.0).alias("power"))
    write_tree_table(tree, "h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet", wider)
    write_tree_table(tree, "h100_sxm/gemm/sglang/0.5.14/gemm_perf.parquet", gemm_frame([2]))
    assert ingest([str(tree)], warehouse).failed_batches == []
    write_tree_table(tree, "h100_sxm/gemm/sglang/0.5.14/gemm_perf.parquet", gemm_frame([3, 4]))
    assert ingest([str(tree)], warehouse).new_batches == 1
    curated = warehouse.read_curated("gemm_perf").sort("m")
    assert curated["m"].to_list() == [1, 3, 4] and curated["power"].to_list() == [1.0, None, None]


def test_a_log_folder_without_a_commit_is_no_table_and_the_next_write_creates_it(tmp_path: Path) -> None:
    """A writer killed between creating `_delta_log` and its first commit (the kill -9 test met it) leaves an empty
    log: readers see no table, listings skip it, and the next write makes it version 0."""
    wh = Warehouse(tmp_path)
    (tmp_path / "notes" / "_delta_log").mkdir(parents=True)
    (tmp_path / "curated" / "gemm_perf" / "_delta_log").mkdir(parents=True)
    assert not wh.has_table("notes") and wh.table_version("notes") is None
    with pytest.raises(WarehouseError, match="no table 'notes'"):
        wh.read_table("notes")
    assert wh.curated_tables() == [] and table_versions(tmp_path) == {}
    wh.write_table("notes", pl.DataFrame({"x": [1, 2]}))
    assert wh.has_table("notes") and wh.table_version("notes") == 0 and wh.read_table("notes")["x"].to_list() == [1, 2]
