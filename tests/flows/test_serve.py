"""prefect.yaml deployments: parsed, checked (errors name file and key), turned into served deployments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.flows.serve import DeploymentError, load_deployments, to_runner

REPO = Path(__file__).resolve().parents[2]


def test_project_deployments_have_schedules_and_build() -> None:
    deployments = {d.name: d for d in load_deployments(REPO / "prefect.yaml")}
    assert set(deployments) == {"nightly-ingest", "weekly-rebuild", "daily-backfill"}
    runner = to_runner(deployments["nightly-ingest"])
    assert runner.name == "nightly-ingest" and runner.parameters["sources"] == ["var/landing"]
    assert [s.schedule.cron for s in runner.schedules] == ["0 2 * * *"]
    assert deployments["daily-backfill"].parameters["backfill_days"] == 7


def test_serve_dry_run_lists_the_deployments(monkeypatch) -> None:
    monkeypatch.chdir(REPO)  # the default file is the working directory's prefect.yaml
    result = CliRunner().invoke(app, ["serve", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    names = {d["name"]: d["schedules"] for d in json.loads(result.stdout)}
    assert names["weekly-rebuild"] == ["cron 0 4 * * 0 (UTC)"]


@pytest.mark.parametrize("body, message", [
    ("deployments:\n  - {name: x, entrypoint: flows/deployments.py:scheduled_run, schedules: [{cron: 'every day'}]}\n",
     r"deployments\[0\].schedules\[0\].cron"),
    ("deployments:\n  - {name: x, entrypoint: elsewhere.py:f}\n", r"deployments\[0\].entrypoint"),
    ("deployments: []\n", "no deployments"),
])
def test_bad_deployments_name_file_and_key(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "prefect.yaml"
    path.write_text(body)
    with pytest.raises(DeploymentError, match=f"prefect.yaml: .*{message}"):
        load_deployments(path)
    result = CliRunner().invoke(app, ["serve", "--file", str(path), "--dry-run"])
    assert result.exit_code == 2


def test_serve_without_a_prefect_yaml_names_the_missing_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["serve", "--dry-run"])
    assert result.exit_code == 2 and f"{tmp_path / 'prefect.yaml'}: no such deployments file" in result.output
