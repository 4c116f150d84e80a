"""The command-line contract, over every command the Typer app has (discovered from it, never listed by hand):
`--help` works and offers --json; a failing call exits with the documented code (1 failure / missing data,
2 usage) with one line `error: ...` on stderr, one JSON object with --json, and never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from perfledger.cli import app

pytestmark = pytest.mark.aic  # estimate's failing calls read the installed wheel's data

runner = CliRunner()


def _commands(command, path=()):
    subs = getattr(command, "commands", None)
    if subs is None:
        yield " ".join(path), command
        return
    for name, sub in sorted(subs.items()):
        yield from _commands(sub, (*path, name))


COMMANDS = dict(_commands(typer.main.get_command(app)))
H200 = ["--system", "h200_sxm", "--backend", "trtllm", "--version", "1.3.0rc20", "--data", "aic-package"]
STATIC = ["--system", "h200_sxm", "--backend", "vllm", "--version", "0.24.0", "--batch", "1", "--isl", "8", "--osl", "2",
          "--data", "aic-package"]
# One failing call per command and the exit code the README documents for it. {tmp} is a fresh folder.
FAILING = {
    "backfill": (["--since", "2026-02-01", "--until", "2026-01-01", "--out", "{tmp}/out"], 2),
    "collect": (["--ops", "nope", "--out", "{tmp}/collect"], 2),
    "diff": (["gemm_perf", "--from", "0"], 1),
    "estimate comm": (["--system", "h999", "--op", "all_gather", "--num-gpus", "2", "--elements", "8",
                       "--data", "aic-package"], 1),
    "estimate gemm": ([*H200, "--quant", "int4_wo", "--m", "64", "--n", "4096", "--k", "4096"], 1),
    "estimate moe": ([*H200, "--quant", "fp8"], 2),
    "estimate prefill-dsa": (["--model", "zai-org/GLM-5-FP8", "--isl", "0", "--cp", "2", "--system", "b200_sxm",
                              "--backend", "sglang", "--version", "0.5.14"], 2),
    "estimate static": (["--model", "kimi-k4", *STATIC], 1),
    "export": (["aic", "{tmp}/export"], 1),
    "generate": ([], 2),
    "ingest": (["{tmp}/no-such-source"], 2),
    "ledger build": (["kimi-k4"], 1),
    "ledger decide": (["kimi-k4", "--date", "2026-01-01", "--text", "x"], 1),
    "ledger events": (["kimi-k4"], 1),
    "ledger report": (["kimi-k4", "--out", "{tmp}/k.md"], 1),
    "maintain": ([], 2),
    "matrix build": (["kimi-k4"], 1),
    "matrix compare": (["nope-a", "nope-b"], 2),
    "matrix count": (["--model", "kimi-k3"], 1),
    "matrix explain": (["kimi-k4", "head"], 1),
    "matrix import": (["{tmp}/no-such-matrix", "--label", "x"], 1),
    "matrix labels": (["--label", "x"], 2),
    "plan": (["--model", "Qwen/Qwen3-32B", "--total-gpus", "8", "--system", "h200_sxm", "--backend", "vllm", "--isl", "8",
              "--osl", "2", "--ttft", "2000", "--tpot", "30", "--data", "aic-package", "--mode", "both"], 2),
    "run": (["--runner", "spark"], 2),
    "serve": (["--file", "{tmp}/no-such-prefect.yaml"], 2),  # not a bare call: under a Prefect harness it would serve
    "slices": (["nope", "--system", "h200_sxm"], 2),
    "tables": ([], 1),
    "validate": (["{tmp}/no-such-source"], 2),
    "versions": (["gemm_perf"], 1),
}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An empty warehouse and out folder, no Prefect server: nothing outside tmp_path is read or written."""
    return {"PERFLEDGER_WAREHOUSE": str(tmp_path / "wh"), "PERFLEDGER_OUT": str(tmp_path / "reports"),
            "PREFECT_API_URL": ""}


def test_every_command_has_a_failing_call():
    assert set(FAILING) == set(COMMANDS)


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_help_works_and_offers_json(path):
    result = runner.invoke(app, [*path.split(), "--help"])
    assert result.exit_code == 0 and "Usage:" in result.stdout and "--json" in result.stdout, result.output
    if any(getattr(p, "required", False) for p in COMMANDS[path].params):
        assert "required" in result.stdout  # --help marks required options


def _one_line_error(result, code: int, as_json: bool) -> None:
    assert result.exc_info[0] is SystemExit, "".join(__import__("traceback").format_exception(*result.exc_info))
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    if as_json:
        assert "error" in json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("path", sorted(COMMANDS))
@pytest.mark.parametrize("as_json", [False, True], ids=["human", "json"])
def test_a_failing_call_is_one_line_with_the_documented_code(path, as_json, env, tmp_path):
    args, code = FAILING[path]
    argv = [*path.split(), *(a.replace("{tmp}", str(tmp_path)) for a in args), *(["--json"] if as_json else [])]
    _one_line_error(runner.invoke(app, argv, env=env), code, as_json)


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_an_unknown_option_is_a_usage_error_naming_it(path, env):
    result = runner.invoke(app, [*path.split(), "--no-such-option"], env=env, prog_name="perfledger")
    _one_line_error(result, 2, False)
    assert "--no-such-option" in result.stderr and f"perfledger {path} --help" in result.stderr
