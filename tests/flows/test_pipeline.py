"""`perfledger run` as a Prefect flow on a small source (the wheel run is exercised by `make run`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefect.testing.utilities import prefect_test_harness

from flows.config import ConfigError, load_pipeline_config
from flows.pipeline import run_pipeline

pytestmark = pytest.mark.xdist_group("prefect")


@pytest.fixture(scope="session")
def prefect_server():
    with prefect_test_harness(server_startup_timeout=60):
        yield


def test_pipeline_ingests_builds_the_ledger_and_writes_the_summary(tmp_path: Path, prefect_server, shared_tree: Path) -> None:
    config_path = tmp_path / "pipeline.yaml"
    kda = shared_tree / "b200_sxm" / "kda"
    config_path.write_text(f"sources: ['{kda}']\nmodels: [kimi-k3]\nwarehouse: '{tmp_path / 'wh'}'\nout: '{tmp_path / 'out'}'\n")
    result = run_pipeline(load_pipeline_config(config_path))
    assert result["ingest"]["failed_batches"] == [] and result["ingest"]["tables"]["kda_perf"] > 0
    summary = Path(result["summary"]).read_text()
    assert "| kda_perf |" in summary and "## Ledger: moonshotai/Kimi-K3" in summary
    assert result["ledgers"][0]["by_status"].get("done", 0) >= 1


def test_config_errors_name_the_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("sources: [aic-package]\nmodel: [kimi-k3]\n")
    with pytest.raises(ConfigError, match=r"p.yaml: unknown key\(s\) \['model'\]"):
        load_pipeline_config(bad)
