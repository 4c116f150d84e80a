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
    assert runner.name == "nightly-ingest" and runner.parameters["landing"] == "var/landing"
    assert [s.schedule.cron for s in runner.schedules] == ["0 2 * * *"]
    assert runner.tags == ["perfledger", "ingest"] and runner.concurrency_limit == 1
    assert deployments["daily-backfill"].parameters["backfill_days"] == 7
    assert all(d.work_pool == {"name": "perfledger"} for d in deployments.values())


def test_every_served_key_reaches_the_runner_deployment(tmp_path: Path) -> None:
    path = tmp_path / "prefect.yaml"
    path.write_text("""deployments:
  - name: x
    entrypoint: flows/deployments.py:scheduled_run
    version: "7"
    tags: [a, b]
    paused: true
    concurrency_limit: {limit: 2, collision_strategy: cancel_new}
    parameters: {stages: [validate]}
    work_pool: {name: pool}
    pull:
      - prefect.deployments.steps.set_working_directory: {directory: "{{ $PERFLEDGER_PROJECT }}"}
    schedules:
      - {cron: "0 1 * * *", timezone: Europe/Berlin, active: false, slug: nightly, parameters: {out: o}}
      - {rrule: "FREQ=WEEKLY;BYDAY=MO", timezone: UTC}
      - {interval: 600, anchor_date: "2026-01-01T00:00:00"}
""")
    (deployment,) = load_deployments(path)
    runner = to_runner(deployment)
    assert (runner.version, runner.tags, runner.paused) == ("7", ["a", "b"], True)
    assert runner.concurrency_limit == 2 and runner.concurrency_options.collision_strategy.value == "CANCEL_NEW"
    cron, rrule, interval = runner.schedules
    assert (cron.schedule.cron, cron.schedule.timezone, cron.active, cron.slug, cron.parameters) == \
        ("0 1 * * *", "Europe/Berlin", False, "nightly", {"out": "o"})
    assert rrule.schedule.rrule.endswith("FREQ=WEEKLY;BYDAY=MO") and interval.schedule.interval.total_seconds() == 600
    described = deployment.describe()
    assert described["schedules"][0].endswith("[inactive]") and described["work_pool"] == "pool"
    assert any("pull steps run on a worker" in n for n in described["notes"])


@pytest.mark.parametrize("entry, message", [
    ("active: false", r"deployments\[0\].active: a deployment has no 'active' key"),
    ("triggers: [{}]", r"deployments\[0\].triggers: event triggers are not served"),
    ("schedule_s: []", r"unknown key\(s\) \['schedule_s'\]"),
    ("concurrency_limit: 0", r"concurrency_limit.limit: must be a whole number"),
    ("concurrency_limit: {limit: 1, collision_strategy: DROP}", r"collision_strategy: expected one of"),
    ("tags: a", r"tags: must be a list of names"),
    ("schedules: [{rrule: 'FREQ=SOMETIMES'}]", r"schedules\[0\].rrule"),
    ("schedules: [{cron: '0 1 * * *', actve: false}]", r"schedules\[0\]: unknown key\(s\) \['actve'\]"),
    ("schedules: [{interval: -5}]", r"schedules\[0\].interval: interval must be a positive number"),
])
def test_keys_serve_cannot_honour_are_refused_by_name(tmp_path: Path, entry: str, message: str) -> None:
    path = tmp_path / "prefect.yaml"
    path.write_text(f"deployments:\n  - name: x\n    entrypoint: flows/deployments.py:scheduled_run\n    {entry}\n")
    with pytest.raises(DeploymentError, match=message):
        load_deployments(path)


def test_serve_without_a_server_refuses_unless_ephemeral(monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: None}):
        human = CliRunner().invoke(app, ["serve"])
        assert human.exit_code == 1 and "Traceback" not in human.output
        assert len(human.stderr.splitlines()) == 1 and human.stderr.startswith("error: ")
        result = CliRunner().invoke(app, ["serve", "--json"])
        assert result.exit_code == 1
        assert "PREFECT_API_URL is not set" in json.loads(result.stdout)["error"] and "--ephemeral" in result.stdout


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
