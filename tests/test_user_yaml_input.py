"""YAML a user hands to a command (pipeline config, prefect.yaml, deployment YAML, reference scenarios, a lane
spec's name) goes through the bounded loader: a FIFO, bad bytes, an alias bomb or a wrong shape is one line
naming the file, never a traceback, a hang or exhausted memory."""

from __future__ import annotations

import os
import re
import shutil
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.estimator.scenarios import DEFAULT_SCENARIOS, ScenarioError, load_scenarios
from perfledger.ledger.specs import LANES_DIR, LaneSpecError, find_spec
from perfledger.settings import package_file

runner = CliRunner()
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcdef", "bcdefg", strict=True))


def _fifo(path: Path) -> None:
    os.mkfifo(path)


HOSTILE = {  # how to make the file, where in it the message points (after its name), what the message says
    "fifo": (_fifo, "", "a FIFO, not a regular file"),
    "not-utf8": (lambda p: p.write_bytes(b"sources: [caf\xe9]\n"), ":1:14", "not UTF-8 text (byte 0xe9)"),
    "alias-bomb": (lambda p: p.write_text(ALIAS_BOMB), "", "expands to more than 1,000,000 values"),
    "deep": (lambda p: p.write_text("a: " + "[" * 100 + "]" * 100 + "\n"), ":1:", "nested deeper than 64 levels"),
    "python-tag": (lambda p: p.write_text("a: !!python/object/apply:os.system [echo]\n"), "", "not valid YAML"),
    "list": (lambda p: p.write_text("- one\n- two\n"), "", None),
}


@pytest.fixture(autouse=True)
def alarm():
    """A hang fails the test instead of stalling the suite."""
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("a loader hung")))
    signal.alarm(60)
    yield
    signal.alarm(0)


def _one_line(result, code: int, path: Path, message: str, where: str = "") -> None:
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}{where}"), result.stderr
    assert message in lines[0], lines[0]


@pytest.mark.parametrize("case", HOSTILE)
def test_pipeline_config(tmp_path: Path, case: str) -> None:
    make, where, message = HOSTILE[case]
    make(path := tmp_path / "p.yaml")
    result = runner.invoke(app, ["run", "--config", str(path), "--out", str(tmp_path / "out")])
    _one_line(result, 2, path, message or "the pipeline config must be a mapping", where)


def test_pipeline_config_gate_of_the_wrong_shape(tmp_path: Path) -> None:
    (path := tmp_path / "p.yaml").write_text("sources: [aic-package]\ngate: [5, 10]\n")
    _one_line(runner.invoke(app, ["run", "--config", str(path)]), 2, path, "gate must be a mapping")


@pytest.mark.parametrize("case", HOSTILE)
def test_prefect_yaml(tmp_path: Path, case: str) -> None:
    make, where, message = HOSTILE[case]
    make(path := tmp_path / "prefect.yaml")
    result = runner.invoke(app, ["serve", "--file", str(path), "--dry-run"])
    _one_line(result, 2, path, message or "expected a mapping with a 'deployments' list", where)


@pytest.mark.parametrize(("text", "message"), [
    ("deployments: {nightly: {}}\n", "expected a mapping with a 'deployments' list"),
    ("deployments:\n- name: n\n  entrypoint: flows/deployments.py:scheduled_run\n  parameters: [1, 2]\n",
     "deployments[0].parameters: must be a mapping"),
])
def test_prefect_yaml_of_the_wrong_shape(tmp_path: Path, text: str, message: str) -> None:
    (path := tmp_path / "prefect.yaml").write_text(text)
    _one_line(runner.invoke(app, ["serve", "--file", str(path), "--dry-run"]), 2, path, message)


@pytest.mark.parametrize("case", [c for c in HOSTILE if c != "list"])
def test_deployment_yaml(tmp_path: Path, case: str) -> None:
    make, where, message = HOSTILE[case]
    make(path := tmp_path / "deploy.yaml")
    result = runner.invoke(app, ["generate", str(path), "--out", str(tmp_path / "out")])
    _one_line(result, 1, path, message, where)
    assert not (tmp_path / "out").exists()


def test_deployment_yaml_duplicate_keys_are_still_refused(tmp_path: Path) -> None:
    example = package_file("perfledger.generator", "examples", "vllm_agg.yaml").read_text()
    (path := tmp_path / "deploy.yaml").write_text(example + "backend: sglang\n")
    _one_line(runner.invoke(app, ["generate", str(path), "--out", str(tmp_path / "out")]), 1, path, "duplicate key 'backend'")


@pytest.mark.parametrize("case", HOSTILE)
def test_reference_scenarios(tmp_path: Path, case: str) -> None:
    make, where, message = HOSTILE[case]
    make(path := tmp_path / "scenarios.yaml")
    with pytest.raises(ScenarioError, match=re.escape(message or "expected a mapping model -> list of scenarios")) as caught:
        load_scenarios(path)
    assert str(caught.value).startswith(f"{path}{where}") and "\n" not in str(caught.value)


@pytest.mark.parametrize(("text", "message"), [
    ("kimi-k3: {name: x}\n", "kimi-k3: expected a list of scenarios"),
    ("kimi-k3: [1]\n", r"kimi-k3\[0\]: expected a mapping"),
    ("kimi-k3: [{name: x, phase: prefill, tokens: 1, ops: gemm, deploy: {tp: 1}}]\n",
     r"kimi-k3\[0\].ops: expected a list of mappings"),
])
def test_reference_scenarios_of_the_wrong_shape(tmp_path: Path, text: str, message: str) -> None:
    (path := tmp_path / "scenarios.yaml").write_text(text)
    with pytest.raises(ScenarioError, match=message):
        load_scenarios(path)


def test_the_shipped_scenarios_still_load() -> None:
    assert "kimi-k3" in load_scenarios(DEFAULT_SCENARIOS)


def test_a_lane_spec_name_never_reaches_outside_the_lanes_folder(tmp_path: Path) -> None:
    lanes = Path(shutil.copytree(LANES_DIR, tmp_path / "lanes"))
    shutil.copyfile(lanes / "kimi-k3.yaml", tmp_path / "outside.yaml")
    assert find_spec("kimi-k3", lanes).model == "moonshotai/Kimi-K3"
    with pytest.raises(LaneSpecError, match="no lane spec for model '../outside'"):
        find_spec("../outside", lanes)
    result = runner.invoke(app, ["ledger", "build", "../../../../../../" + str(tmp_path / "outside")[1:]])
    assert result.exit_code == 1 and "does not exist" in result.stderr  # a path: only ever a config.json there
