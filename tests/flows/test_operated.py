"""The pipeline as Prefect shows and retries it: transient-only retries, skipped stages and task-graph
edges, the landing folder of nightly-ingest (real Prefect test server, real ../shared files)."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest
from prefect import flow, task

from perfledger.flows.config import load_pipeline_config
from perfledger.flows.deployments import scheduled_run
from perfledger.flows.ingest import ingest_task
from perfledger.flows.pipeline import run_pipeline
from perfledger.flows.retry import RETRY_TRANSIENT, is_transient
from perfledger.flows.tasks import SKIPPED
from perfledger.schemas.catalog import load_catalog
from perfledger.warehouse.discover import SourceError, discover, holds_perf_data
from perfledger.warehouse.lock import WarehouseBusy
from perfledger.warehouse.store import Warehouse, WarehouseError
from tests.flows.conftest import write_config

pytestmark = pytest.mark.xdist_group("prefect")
CAMPAIGN = "vllm-0.20.0-campaign"


def _raised_from(cause: BaseException) -> WarehouseError:
    try:
        raise WarehouseError("cannot write warehouse table x") from cause
    except WarehouseError as exc:
        return exc


def test_only_transient_failures_count_as_transient() -> None:
    assert is_transient(WarehouseBusy("busy")) and is_transient(TimeoutError())
    assert is_transient(_raised_from(OSError(errno.EAGAIN, "try again")))
    assert not is_transient(SourceError("x: no such file or directory"))
    assert not is_transient(_raised_from(OSError(errno.ENOSPC, "disk full")))
    assert not is_transient(FileNotFoundError(errno.ENOENT, "gone")) and not is_transient(ValueError("bad config"))


ATTEMPTS: list[str] = []


@task(**{**RETRY_TRANSIENT, "retry_delay_seconds": 0})
def busy_once() -> str:
    ATTEMPTS.append("busy")
    if ATTEMPTS.count("busy") == 1:
        raise WarehouseBusy("warehouse w is busy")
    return "done"


@flow
def retry_probe(root: str) -> tuple:
    missing = ingest_task(["/nonexistent/landing"], root, return_state=True)
    return missing, busy_once(return_state=True)


def test_a_missing_source_fails_once_and_a_busy_warehouse_is_retried(tmp_path: Path, prefect_server) -> None:
    from prefect.client.orchestration import get_client

    missing, busy = retry_probe(str(tmp_path / "wh"))
    with get_client(sync_client=True) as client:
        missing_run = client.read_task_run(missing.state_details.task_run_id)
        busy_run = client.read_task_run(busy.state_details.task_run_id)
    assert missing.is_failed() and missing_run.run_count == 1 and "no such file" in missing.message
    assert busy.is_completed() and busy_run.run_count == 2


def test_nested_landing_folders_are_found_and_an_empty_landing_holds_nothing(tmp_path: Path, shared_campaign: Path) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    assert not holds_perf_data(landing)
    with pytest.raises(SourceError, match="no perf data found"):
        discover(str(landing), load_catalog())
    for system in ("h200_sxm", "a100_sxm"):
        folder = landing / CAMPAIGN / system
        folder.mkdir(parents=True)
        shutil.copy(shared_campaign / system / "custom_allreduce_perf.txt", folder)
    assert holds_perf_data(landing)
    found = discover(str(landing), load_catalog())
    assert [(b.system, b.backend, b.version) for b in found] == [("a100_sxm", "vllm", "0.20.0"), ("h200_sxm", "vllm", "0.20.0")]


def test_nightly_ingest_on_a_fresh_checkout_creates_the_landing_folder(tmp_path: Path, prefect_server,
                                                                       shared_campaign: Path) -> None:
    landing = tmp_path / "var" / "landing"
    params = {"landing": str(landing), "warehouse": str(tmp_path / "wh"), "out": str(tmp_path / "out"),
              "stages": ["ingest", "validate"]}
    empty = scheduled_run(**params)
    assert landing.is_dir() and empty["ingest"]["batches"] == 0
    folder = landing / CAMPAIGN / "h200_sxm"
    folder.mkdir(parents=True)
    shutil.copy(shared_campaign / "h200_sxm" / "custom_allreduce_perf.txt", folder)
    landed = scheduled_run(**params)
    assert landed["ingest"]["new_batches"] == 1 and not landed["ingest"]["failed_batches"]
    assert Warehouse(tmp_path / "wh").curated_tables() == ["custom_allreduce_perf"]


def test_skipped_stages_are_completed_tasks_after_their_upstream(tmp_path: Path, prefect_server, shared_tree: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterName
    from prefect.client.schemas.sorting import TaskRunSort

    source = shared_tree / "h200_sxm" / "gemm" / "vllm" / "0.22.0"
    cfg = load_pipeline_config(write_config(tmp_path / "p.yaml", sources=[str(source)], stages=["ingest", "validate"],
                                            warehouse=tmp_path / "wh", out=tmp_path / "out"))
    assert {s["stage"]: s["status"] for s in run_pipeline(cfg)["stages"]} == {"ingest": "ran", "validate": "ran"}
    assert {s["stage"]: s["status"] for s in run_pipeline(cfg)["stages"]} == {"ingest": "ran", "validate": "skipped"}
    with get_client(sync_client=True) as client:
        latest = client.read_task_runs(task_run_filter=TaskRunFilter(name=TaskRunFilterName(like_="validate")),
                                       sort=TaskRunSort.EXPECTED_START_TIME_DESC, limit=1)[0]
        assert latest.state.is_completed() and latest.state.message == SKIPPED
        (edge,) = latest.task_inputs["wait_for"]
        upstream = client.read_task_run(edge.id)
    assert upstream.name.startswith("ingest-sources") and upstream.flow_run_id == latest.flow_run_id
