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
    given = runner.invoke(app, ["--reference-data", str(tmp_path), *args])  # accepted: the empty warehouse is what fails
    assert given.exit_code == 1 and "holds no curated tables" in given.output
    assert settings.reference_data() == tmp_path
    missing = runner.invoke(app, ["--reference-data", str(tmp_path / "nope"), *args])
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_an_object_store_warehouse_is_a_uri_with_options_from_the_settings_file_then_the_environment(
        tmp_path: Path, monkeypatch) -> None:
    import pytest

    from perfledger.warehouse.objects import obstore_options

    storage = tmp_path / "storage.toml"
    storage.write_text('["s3://perf"]\naws_region = "eu-central-1"\naws_allow_http = false\n'
                       '["s3://perf/lab"]\naws_endpoint_url = "http://127.0.0.1:9000"\naws_allow_http = true\n'
                       '["s3://other"]\naws_region = "us-west-2"\n')
    monkeypatch.setenv(settings.STORAGE_FILE_ENV, str(storage))
    monkeypatch.delenv(settings.STORAGE_OPTIONS_ENV, raising=False)
    monkeypatch.setenv(settings.WAREHOUSE_ENV, "s3://perf/lab/wh/")
    root = settings.warehouse_root()
    assert isinstance(root, settings.ObjectLocation) and str(root) == "s3://perf/lab/wh"
    assert root.storage_options == {"aws_region": "eu-central-1", "aws_endpoint_url": "http://127.0.0.1:9000",
                                    "aws_allow_http": "true"}
    assert str(root / "curated" / "gemm_perf") == "s3://perf/lab/wh/curated/gemm_perf" and (root / "raw").name == "raw"
    assert str((root / "curated").relative_to(root)) == "curated" and root.bucket == "perf" and root.key == "lab/wh"
    monkeypatch.setenv(settings.STORAGE_OPTIONS_ENV, '{"aws_region": "ap-south-1", "aws_access_key_id": "k"}')
    options = settings.location("s3://perf/x").storage_options
    assert options == {"aws_region": "ap-south-1", "aws_allow_http": "false", "aws_access_key_id": "k"}
    assert "aws_access_key_id" not in repr(settings.location("s3://perf/x")) + str(settings.location("s3://perf/x"))
    assert obstore_options({"aws_endpoint_url": "http://h:1", "aws_allow_http": "true", "aws_region": "r",
                            "aws_s3_allow_unsafe_rename": "true"}) == ({"endpoint": "http://h:1", "region": "r"},
                                                                       {"allow_http": True})
    assert settings.location("file:///srv/wh") == Path("/srv/wh") and settings.location("~/wh") == Path.home() / "wh"
    with pytest.raises(settings.LocationError, match="became a path"):
        settings.location(Path("s3://perf/wh"))
    for bad in ("ftp://host/wh", "s3://", "http://example/wh"):
        with pytest.raises(settings.LocationError, match="unsupported location"):
            settings.location(bad)
    monkeypatch.setenv(settings.STORAGE_OPTIONS_ENV, "[1]")
    with pytest.raises(settings.LocationError, match="must be a JSON object"):
        settings.location("s3://perf/x")
    monkeypatch.setenv(settings.OUT_ENV, "s3://perf/site")
    with pytest.raises(settings.LocationError, match="local folder"):
        settings.reports_dir()
    storage.write_text("[unclosed")
    monkeypatch.delenv(settings.STORAGE_OPTIONS_ENV)
    with pytest.raises(settings.LocationError, match="storage.toml: unreadable storage settings"):
        settings.location("s3://perf/x")
