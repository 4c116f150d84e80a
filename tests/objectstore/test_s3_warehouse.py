"""The warehouse on S3-compatible object storage, against a real S3 server (moto, tests/objectstore/conftest.py).

The same checks the local-disk tests make (tests/flows/test_reliability.py's helpers are reused): an ingest
equals one on local disk, time travel, ledger and matrix builds, two concurrent ingests, kill -9 and a
re-ingest that converges; plus what object storage adds: the run lock is a lease another machine sees, each
Delta commit is a conditional put that refuses a concurrent conflicting one, and nothing local is written.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.flows.tasks import ledger_task
from perfledger.ledger.hooks import on_ingest
from perfledger.settings import ObjectLocation, location
from perfledger.warehouse import objects
from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.lock import LOCK_NAME, WarehouseBusy, run_lock
from perfledger.warehouse.store import Warehouse, WarehouseConflict
from tests.flows.conftest import prefect_server  # noqa: F401 (the fixture, for `perfledger run`)
from tests.flows.test_reliability import VOLATILE, _sources, _state, kill_9_and_rerun, two_concurrent_ingests
from tests.ledger.test_matrix_hostile_input import HEADER, ROW, matrix_folder
from tests.warehouse.conftest import gemm_frame, write_tree_table
from tests.warehouse.test_commit_unit import InjectedFault, _failing_at, _first_run, _second_run, physical_state

pytestmark = pytest.mark.xdist_group("objectstore-s3")


def _cli(*args: str) -> tuple[int, dict | list | str]:
    result = CliRunner().invoke(app, [*args, "--json"])
    lines = result.stdout.strip().splitlines()
    try:
        return result.exit_code, json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        return result.exit_code, result.output


def _stable(value: object) -> object:
    """A CLI answer without its ingest/build timestamps (they differ between two warehouses by nature)."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in (*VOLATILE, "built_at", "at")}
    return [_stable(v) for v in value] if isinstance(value, (list, tuple)) else value


def _strings(wh: Warehouse) -> set[str]:
    """Every text value stored in any table of the warehouse."""
    names = [f"curated/{t}" for t in wh.curated_tables()]
    root = wh.root
    keys = objects.listing(root) if isinstance(root, ObjectLocation) else [(str(p.relative_to(root)), None)
                                                                           for p in root.rglob("_delta_log/*.json")]
    names += sorted({key.split("/_delta_log/")[0] for key, _ in keys if "/_delta_log/" in f"/{key}" and
                     not key.startswith("curated/")})
    values: set[str] = set()
    for name in names:
        frame = wh._read(root / name, None, {})
        for column, dtype in frame.schema.items():
            if dtype == pl.String:
                values.update(v for v in frame[column].unique().to_list() if v)
    return values


@pytest.fixture(scope="module")
def ingested(s3, shared_tree: Path, tmp_path_factory) -> dict:
    """The reliability subset of ../shared ingested once into S3 and once into a local folder, ledgers built."""
    sources = _sources(shared_tree)
    uri = f"{s3.bucket()}/wh"
    local = tmp_path_factory.mktemp("local") / "wh"
    for root in (uri, local):
        assert ingest(sources, Warehouse(root), on_commit=on_ingest).failed_batches == []
        ledger_task.fn(str(root), "kimi-k3")
    return {"uri": uri, "local": local, "sources": sources}


def test_an_ingest_on_s3_equals_one_on_local_disk_and_writes_nothing_local(ingested, tmp_path: Path,
                                                                           monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    s3_state, local_state = _state(ingested["uri"]), _state(ingested["local"])
    assert s3_state.keys() == local_state.keys() and len(s3_state) >= 4
    for name, frame in local_state.items():
        assert s3_state[name].equals(frame), name
    code, tables = _cli("tables", "--warehouse", ingested["uri"])
    assert code == 0 and tables == _cli("tables", "--warehouse", str(ingested["local"]))[1] and len(tables) > 10
    before = Warehouse(ingested["uri"]).table_version("batches")
    code, again = _cli("ingest", *ingested["sources"], "--warehouse", ingested["uri"])
    assert code == 0 and again["new_batches"] == 0 and Warehouse(ingested["uri"]).table_version("batches") == before
    code, checked = _cli("validate", *ingested["sources"], "--warehouse", ingested["uri"])
    assert code == 0 and checked["new_batches"] == 0
    assert list(tmp_path.iterdir()) == []  # no folder named `s3:` or anything else


def test_the_raw_zone_keeps_every_input_file_on_s3(ingested) -> None:
    wh = Warehouse(ingested["uri"])
    batches = wh.read_table("batches")
    raw = {key for key, _ in objects.listing(wh.root / "raw")}
    assert {key.split("/")[0] for key in raw} == set(batches["batch_id"])
    assert len(raw) == sum(batches["files"]) + len([k for k in raw if k.endswith((".yaml", ".json"))])


def test_an_export_from_s3_to_a_local_folder_equals_one_from_local_disk(ingested, tmp_path: Path) -> None:
    trees = {}
    for name, root in (("s3", ingested["uri"]), ("local", str(ingested["local"]))):
        code, result = _cli("export", "aic", str(tmp_path / name), "--warehouse", root)
        assert code == 0 and result["files"] > 0, result
        trees[name] = {str(p.relative_to(tmp_path / name)): pl.read_parquet(p) if p.suffix == ".parquet" else p.read_text()
                       for p in sorted((tmp_path / name).rglob("*")) if p.is_file()}
    assert trees["s3"].keys() == trees["local"].keys()
    for key, value in trees["local"].items():
        assert value.equals(trees["s3"][key]) if isinstance(value, pl.DataFrame) else value == trees["s3"][key], key


def test_time_travel_and_diff_on_s3(bucket: str, tmp_path: Path) -> None:
    uri = f"{bucket}/tt"
    rel = "h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet"
    write_tree_table(tmp_path / "v1", rel, gemm_frame([1, 2, 3], [0.1, 0.2, 0.3]))
    write_tree_table(tmp_path / "v2", rel, gemm_frame([1, 2, 4], [0.1, 0.5, 0.4]))
    wh = Warehouse(uri)
    ingest([str(tmp_path / "v1")], wh)
    first = wh.read_curated("gemm_perf").select("m", "latency")
    ingest([str(tmp_path / "v2")], wh)
    assert wh.table_version("gemm_perf", curated=True) == 1
    assert wh.read_curated("gemm_perf", as_of=0).select("m", "latency").equals(first)
    assert wh.read_curated("gemm_perf").select("m", "latency").rows() == [(1, 0.1), (2, 0.5), (4, 0.4)]
    code, diff = _cli("diff", "gemm_perf", "--from", "0", "--warehouse", uri)
    assert code == 0 and (diff["added"], diff["removed"], diff["changed"]) == (1, 1, 1)
    code, missing = _cli("diff", "gemm_perf", "--from", "7", "--warehouse", uri)
    assert code == 1 and "no version 7; valid versions are 0..1" in missing["error"]


def test_ledger_and_matrix_builds_on_s3_equal_local_disk(ingested) -> None:
    builds = {}
    for root in (ingested["uri"], str(ingested["local"])):
        code, ledger = _cli("ledger", "build", "kimi-k3", "--warehouse", root, "--no-record")
        assert code == 0, ledger
        code, matrix = _cli("matrix", "build", "kimi-k3", "--warehouse", root)
        assert code == 0, matrix
        builds[root] = _stable((ledger, matrix))
    s3_build, local_build = builds.values()
    assert s3_build == local_build
    from perfledger.ledger.matrix.store import read_snapshot

    snapshots = [read_snapshot(Warehouse(root), "perfledger")[1] for root in (ingested["uri"], ingested["local"])]
    snapshots = [frame.drop("imported_at", strict=False) for frame in snapshots]  # when each was stored
    assert snapshots[0].height > 0 and snapshots[0].equals(snapshots[1])


def test_stored_rows_name_no_warehouse_location(ingested) -> None:
    """After ingest, ledger and matrix builds (the matrix stores the estimator's miss messages)."""
    for root, text in ((ingested["uri"], ingested["uri"]), (ingested["local"], str(ingested["local"]))):
        stored = _strings(Warehouse(root))
        assert any("rows for" in v and "in the warehouse" in v for v in stored)  # a miss message is among them
        leaked = sorted(v for v in stored if text in v)
        assert leaked == [], f"{root}: stored values name the warehouse: {leaked[:3]}"


def test_matrix_import_and_labels_on_s3(bucket: str, tmp_path: Path) -> None:
    folder = matrix_folder(tmp_path / "matrix", f"{HEADER}\n{ROW}\n")
    code, imported = _cli("matrix", "import", str(folder), "--label", "lab", "--warehouse", f"{bucket}/wh")
    assert code == 0, imported
    code, labels = _cli("matrix", "labels", "--warehouse", f"{bucket}/wh")
    assert code == 0 and [entry["label"] for entry in labels["labels"]] == ["lab"], labels


def test_an_estimate_reads_an_s3_warehouse(ingested) -> None:
    answers = [_cli("estimate", "gemm", "--system", "h200_sxm", "--backend", "sglang", "--version", "0.5.6.post2",
                    "--quant", "fp8", "--m", "64", "--n", "4096", "--k", "4096", "--warehouse", root)
               for root in (ingested["uri"], str(ingested["local"]))]
    assert answers[0][0] == 0 and answers[0] == answers[1]


def test_the_main_job_runs_on_an_s3_warehouse_and_skips_unchanged_work(bucket: str, tmp_path: Path, shared_tree: Path,
                                                                       prefect_server) -> None:  # noqa: F811
    config = tmp_path / "pipeline.yaml"
    config.write_text(f"sources: ['{shared_tree / 'b200_sxm' / 'kda'}']\nmodels: [kimi-k3]\n"
                      f"stages: [ingest, validate, ledger, publish]\n")
    args = ["run", "--config", str(config), "--warehouse", f"{bucket}/wh", "--out", str(tmp_path / "out")]
    code, first = _cli(*args)
    assert code == 0 and first["ingest"]["tables"]["kda_perf"] > 0, first
    assert (tmp_path / "out" / "index.html").is_file() and first["ledgers"][0]["by_status"].get("done", 0) >= 1
    assert Warehouse(f"{bucket}/wh").has_table("ledger_cells")
    code, second = _cli(*args)
    assert code == 0 and second["ingest"]["new_batches"] == 0
    assert {s["stage"]: s["status"] for s in second["stages"]}["ledger"] == "skipped"


def test_a_fault_at_any_write_on_s3_leaves_the_prior_state_and_a_rerun_equals_a_clean_ingest(s3, tmp_path: Path) -> None:
    """tests/warehouse/test_commit_unit.py's check on object storage: write steps of a real ingest fail in
    turn (every fifth and the last: the local test takes every one; the rollback code is the same for all
    of them here, log entries and the files they added, raw copies), each leaving exactly the prior state."""
    first, second = _first_run(tmp_path), _second_run(tmp_path)

    def prior() -> str:
        root = f"{s3.bucket()}/wh"
        assert ingest(first, Warehouse(root), on_commit=on_ingest).failed_batches == []
        return root

    clean = Warehouse(prior())
    before = physical_state(clean.root)
    clean.write_observer, writes = _failing_at(0)
    assert ingest(second, clean, on_commit=on_ingest).new_batches == 3
    after = physical_state(clean.root)
    assert len(writes) >= 10
    for step in sorted({*range(1, len(writes) + 1, 5), len(writes)}):
        warehouse = Warehouse(prior())
        warehouse.write_observer, _ = _failing_at(step)
        with pytest.raises(InjectedFault):
            ingest(second, warehouse, on_commit=on_ingest)
        assert physical_state(warehouse.root) == before, f"fault at write {step} left a trace"
        assert ingest(second, Warehouse(warehouse.root), on_commit=on_ingest).new_batches == 3
        assert physical_state(warehouse.root) == after, f"re-run after a fault at write {step} differs from a clean ingest"


def test_two_concurrent_ingests_on_s3_commit_or_are_told_busy(bucket: str, shared_tree: Path) -> None:
    two_concurrent_ingests(_sources(shared_tree), f"{bucket}/wh")


def test_kill_9_during_an_s3_ingest_then_a_re_ingest_equals_a_clean_one(bucket: str, shared_tree: Path) -> None:
    killed = kill_9_and_rerun(_sources(shared_tree), lambda name: f"{bucket}/{name}", trials=3)
    assert killed >= 2, f"only {killed} of 3 kills landed before the ingest finished"


def test_the_run_lock_is_a_lease_every_machine_sees(bucket: str, shared_tree: Path) -> None:
    root = location(f"{bucket}/wh")
    with run_lock(root, purpose="test holder"):
        assert objects.read(root / LOCK_NAME) is not None
        code, busy = _cli("ingest", str(shared_tree / "l40s" / "kda"), "--warehouse", str(root))
        assert code == 1 and "is busy: another run holds its lock" in busy["error"] and "test holder" in busy["error"]
        with pytest.raises(WarehouseBusy):
            with run_lock(root, timeout_s=0.3):
                pass
    assert objects.read(root / LOCK_NAME) is None
    assert not Warehouse(root).has_table("batches")
    # a holder on another machine that stopped renewing, and one on this machine whose process is gone
    for holder in ({"host": "elsewhere", "pid": 1, "expires": 0}, {"host": os.uname().nodename, "pid": 2 ** 22 + 7,
                                                                   "expires": 4e9}):
        assert objects.create(root / LOCK_NAME, json.dumps(holder).encode())
        with run_lock(root, timeout_s=1):
            pass
        assert objects.read(root / LOCK_NAME) is None
    live = {"host": "elsewhere", "pid": 1, "expires": 4e9}
    assert objects.create(root / LOCK_NAME, json.dumps(live).encode())
    with pytest.raises(WarehouseBusy):
        with run_lock(root, timeout_s=0.5):
            pass
    objects.delete([root / LOCK_NAME])


def _replace_at_once(uri: str, values: list[int]) -> list[int | str]:
    """One thread per value replaces slice `a` of table `cells` at the same instant: each value that
    committed, or the message of the refusal."""
    outcomes: list[int | str] = []
    start = threading.Barrier(len(values))

    def replace(value: int) -> None:
        writer = Warehouse(uri)
        start.wait()
        try:
            writer.replace_slices(writer.table_uri("cells"), pl.DataFrame({"k": ["a"], "v": [value]}), ["k"], [("a",)])
            outcomes.append(value)
        except WarehouseConflict as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=replace, args=(value,)) for value in values]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_delta_commits_on_s3_refuse_a_concurrent_conflicting_write(bucket: str) -> None:
    """Below the lease: two writers replacing one slice at the same instant, with no lock at all. deltalake's
    conditional put lets one commit and refuses the other with a clear conflict; concurrent appends all commit."""
    uri = f"{bucket}/wh"
    table = Warehouse(uri).table_uri("cells")
    Warehouse(uri).replace_slices(table, pl.DataFrame({"k": ["a", "b"], "v": [0, 0]}), ["k"], [("a",), ("b",)])
    for trial in range(3):
        outcomes = _replace_at_once(uri, [10 * trial + 1, 10 * trial + 2])
        won = [o for o in outcomes if isinstance(o, int)]
        refused = [o for o in outcomes if isinstance(o, str)]
        assert len(won) >= 1 and all("is busy: another writer committed to it at the same time" in r for r in refused)
        rows = dict(Warehouse(uri).read_table("cells").rows())
        assert rows["b"] == 0 and (rows["a"] in won if len(won) == 1 else rows["a"] in (10 * trial + 1, 10 * trial + 2))
    Warehouse(uri).write_table("log", pl.DataFrame({"i": [-1]}))
    appends = [threading.Thread(target=lambda i=i: Warehouse(uri).write_table("log", pl.DataFrame({"i": [i]})))
               for i in range(4)]
    for thread in appends:
        thread.start()
    for thread in appends:
        thread.join()
    assert sorted(Warehouse(uri).read_table("log")["i"]) == [-1, 0, 1, 2, 3]
    assert Warehouse(uri).table_version("log") == 4


def test_object_storage_outputs_and_unknown_schemes_are_usage_errors(bucket: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = _cli("export", "aic", f"{bucket}/export", "--warehouse", f"{bucket}/wh")
    assert code == 2 and "export writes a local folder" in out["error"]
    code, out = _cli("run", "--warehouse", f"{bucket}/wh", "--out", f"{bucket}/site")
    assert code == 2 and "local folder" in out["error"]
    code, out = _cli("tables", "--warehouse", "ftp://host/wh")
    assert code == 2 and "unsupported location" in out["error"]
    code, out = _cli("ingest", "aic-package", "--warehouse", "s3://no-such-bucket-here/wh")
    assert code == 1 and "cannot write warehouse s3://no-such-bucket-here/wh" in out["error"]
    code, out = _cli("tables", "--warehouse", "s3://no-such-bucket-here/wh")
    assert code == 1 and "cannot read warehouse: s3://no-such-bucket-here/wh" in out["error"]
    assert list(tmp_path.iterdir()) == []
