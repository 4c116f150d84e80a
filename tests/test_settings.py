"""Locations: an option, else the environment, else a default under the working directory's state folder."""

from __future__ import annotations

import os
from pathlib import Path

from typer.testing import CliRunner

from perfledger import settings
from perfledger.cli import app


def test_defaults_sit_under_the_state_folder_of_the_working_directory(tmp_path: Path, monkeypatch) -> None:
    for name in (settings.HOME_ENV, settings.WAREHOUSE_ENV, settings.OUT_ENV, "PREFECT_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    assert settings.warehouse_root() == tmp_path / "var" / "warehouse"
    assert settings.reports_dir() == tmp_path / "var" / "reports" and settings.prefect_home() == tmp_path / "var" / "prefect"
    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path / "state"))
    monkeypatch.setenv(settings.OUT_ENV, str(tmp_path / "site"))
    assert settings.warehouse_root() == tmp_path / "state" / "warehouse" and settings.reports_dir() == tmp_path / "site"
    assert settings.warehouse_root("mine") == Path("mine")


def test_config_paths_name_package_data_or_sit_beside_the_file(tmp_path: Path) -> None:
    lanes = settings.config_path("package://perfledger.schemas/lanes/kimi-k3.yaml", tmp_path)
    assert lanes.is_file() and lanes.parent == settings.package_file("perfledger.schemas", "lanes")
    assert settings.config_path("a/b.yaml", tmp_path) == tmp_path / "a" / "b.yaml"
    assert settings.config_path("/abs.yaml", tmp_path) == Path("/abs.yaml")


def test_reference_data_option_sets_the_environment_for_every_command(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(settings.REFERENCE_ENV, os.environ.get(settings.REFERENCE_ENV, ""))
    runner = CliRunner()
    args = ["tables", "--warehouse", str(tmp_path / "wh"), "--json"]
    assert runner.invoke(app, ["--reference-data", str(tmp_path), *args]).exit_code == 0
    assert settings.reference_data() == tmp_path
    missing = runner.invoke(app, ["--reference-data", str(tmp_path / "nope"), *args])
    assert missing.exit_code == 2 and "does not exist" in missing.output
