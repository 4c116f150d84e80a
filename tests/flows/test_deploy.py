"""prefect.yaml as operated: `prefect deploy --all`, a process worker, every deployment run to Completed,
and two overlapping triggers that queue instead of failing. Real Prefect: the session's test server,
the `prefect` CLI and a `prefect worker` subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import SHARED_CAMPAIGN, SHARED_TREE

pytestmark = [pytest.mark.xdist_group("prefect"), pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).with_name("prefect"))
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def _env(**extra: str) -> dict[str, str]:
    from prefect.settings import PREFECT_API_URL

    env = {k: v for k, v in os.environ.items() if k != "PERFLEDGER_PROJECT"}  # prefect deploy would bake it in
    return {**env, "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_WORKER_QUERY_SECONDS": "1",
            "PREFECT_WORKER_PREFETCH_SECONDS": "1", **extra}


def _prefect(*args: str) -> str:
    done = subprocess.run([PREFECT, "--no-prompt", *args], cwd=REPO, env=_env(), capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _wait(client, run_ids: list, timeout_s: float = 420) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = {r: client.read_flow_run(r) for r in run_ids}
        if all(run.state and run.state.type.value in FINAL for run in runs.values()):
            return runs
        time.sleep(1)
    raise AssertionError({str(r): run.state.name for r, run in runs.items()})


def test_deploy_all_and_a_process_worker_run_every_deployment(tmp_path: Path, prefect_server) -> None:
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    _prefect("work-pool", "create", "perfledger", "--type", "process", "--overwrite")
    deployed = _prefect("deploy", "--all")
    assert "nightly-ingest" in deployed and "daily-backfill" in deployed
    landing = tmp_path / "landing"  # not created: the nightly run makes it, then walks landing/<campaign>/<system>/
    common = {"warehouse": str(tmp_path / "wh"), "out": str(tmp_path / "out"), "stages": ["ingest", "validate"]}
    small = str(SHARED_TREE / "h200_sxm" / "gemm" / "vllm" / "0.22.0")
    with get_client(sync_client=True) as client:
        deployments = {d.name: d for d in client.read_deployments()}
        assert {"nightly-ingest", "weekly-rebuild", "daily-backfill"} <= set(deployments)
        nightly = deployments["nightly-ingest"]
        assert nightly.work_pool_name == "perfledger" and set(nightly.tags) == {"perfledger", "ingest"}
        assert nightly.entrypoint == "perfledger.flows.deployments:scheduled_run"
        assert nightly.pull_steps == [{"prefect.deployments.steps.set_working_directory":
                                       {"directory": "{{ $PERFLEDGER_PROJECT }}"}}]
        project = tmp_path / "project"  # the worker's folder: no checkout, the entrypoint is the installed module
        project.mkdir()
        worker = subprocess.Popen([PREFECT, "worker", "start", "--pool", "perfledger", "--type", "process"],
                                  cwd=tmp_path, env=_env(PERFLEDGER_PROJECT=str(project)),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            first = run_deployment("perfledger-scheduled/nightly-ingest", parameters={**common, "landing": str(landing)},
                                   timeout=0)
            assert _wait(client, [first.id])[first.id].state.type.value == "COMPLETED"
            assert landing.is_dir()
            campaign = landing / "vllm-0.20.0-campaign" / "h200_sxm"
            campaign.mkdir(parents=True)
            shutil.copy(SHARED_CAMPAIGN / "h200_sxm" / "custom_allreduce_perf.txt", campaign)
            runs = [run_deployment("perfledger-scheduled/nightly-ingest", parameters={**common, "landing": str(landing)},
                                   timeout=0),
                    # two overlapping triggers of one deployment on one output folder: the second queues
                    run_deployment("perfledger-scheduled/weekly-rebuild", parameters={**common, "sources": [small]}, timeout=0),
                    run_deployment("perfledger-scheduled/weekly-rebuild", parameters={**common, "sources": [small]}, timeout=0),
                    run_deployment("perfledger-scheduled/daily-backfill",
                                   parameters={**common, "stages": ["validate"]}, timeout=0)]
            finished = _wait(client, [r.id for r in runs])
        finally:
            worker.terminate()
            worker.wait(timeout=30)
        states = {r.name: (r.state.type.value, r.state.message) for r in finished.values()}
        assert all(state == "COMPLETED" for state, _ in states.values()), states
        from perfledger.warehouse.store import Warehouse

        wh = Warehouse(tmp_path / "wh")
        assert {"custom_allreduce_perf", "gemm_perf"} <= set(wh.curated_tables())
        batches = wh.read_table("batches")
        assert batches.filter(batches["system"] == "h200_sxm").height == 2  # the landed campaign + the gemm folder
