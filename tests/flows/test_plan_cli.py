"""`perfledger plan`: JSON shape, --out artifacts, exit codes (0 answered, 1 nothing meets the SLA / no data, 2 usage)."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from perfledger.cli import app

pytestmark = pytest.mark.aic
QWEN = ["--model", "Qwen/Qwen3-32B", "--total-gpus", "8", "--system", "h200_sxm", "--backend", "vllm", "--isl", "4000",
        "--osl", "500", "--ttft", "2000", "--data", "aic-package"]
SIDE = {"workers", "tp", "pp", "dp", "moe_tp", "moe_ep", "cp", "batch"}
TOTALS = {"tokens_per_s_per_gpu", "tokens_per_s_per_gpu_cluster", "tokens_per_s_per_user", "ttft_ms", "tpot_ms",
          "request_latency_ms", "concurrency", "gpus", "replicas", "total_gpus_used"}


def _plan(*args):
    return CliRunner().invoke(app, ["plan", *args])


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan")
    res = _plan(*QWEN, "--tpot", "30", "--json", "--out", str(out))
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout), out


def test_json_has_every_mode_its_front_and_the_best(planned):
    payload, _ = planned
    assert {"best", "agg", "disagg", "agg_pareto", "disagg_pareto", "warnings", "question"} <= set(payload)
    for row in payload["disagg"] + payload["disagg_pareto"]:
        assert TOTALS <= set(row) and set(row["prefill"]) == SIDE and set(row["decode"]) == SIDE
        assert row["gpus"] == row["prefill"]["workers"] * row["prefill"]["tp"] + row["decode"]["workers"] * row["decode"]["tp"]
    for row in payload["agg"]:
        assert TOTALS | {"batch", "tp", "pp", "dp", "moe_tp", "moe_ep", "cp"} <= set(row)
    assert all(r["tpot_ms"] <= 30 for r in payload["agg"] + payload["disagg"])
    best = payload["best"]
    assert best["mode"] in ("agg", "disagg")
    assert best["tokens_per_s_per_gpu_cluster"] == max(payload[m][0]["tokens_per_s_per_gpu_cluster"] for m in ("agg", "disagg"))


def test_out_holds_the_plan_the_plot_and_rendered_top_configs(planned):
    payload, out = planned
    assert json.loads((out / "plan.json").read_text()) == payload
    assert (out / "pareto.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for mode in ("agg", "disagg"):
        for k, row in enumerate(payload[mode], 1):
            folder = out / mode / f"top{k}"
            assert (folder / "run_0.sh").is_file() and (folder / "k8s_deploy.yaml").is_file()
            config = yaml.safe_load((folder / "generator_config.yaml").read_text())["WorkerConfig"]
            if mode == "disagg":
                assert config["prefill_workers"] == row["prefill"]["workers"] * row["replicas"]
                assert config["decode_workers"] == row["decode"]["workers"] * row["replicas"]
            else:
                assert config["agg_workers"] == row["replicas"]


def test_a_tpot_no_config_meets_exits_1_naming_each_mode():
    res = _plan(*QWEN, "--tpot", "2", "--json")
    assert res.exit_code == 1
    payload = json.loads(res.stdout)
    assert payload["best"] is None and set(payload["reasons"]) == {"agg", "disagg"}
    assert "too tight" in payload["reasons"]["disagg"] and "too tight" in res.stderr


def test_a_model_that_fits_nowhere_says_so():
    args = ["--model", "Qwen/Qwen3-235B-A22B", "--total-gpus", "2", "--system", "h200_sxm", "--backend", "vllm",
            "--isl", "4000", "--osl", "500", "--ttft", "2000", "--tpot", "30", "--data", "aic-package", "--mode", "disagg"]
    res = _plan(*args, "--json")
    assert res.exit_code == 1
    assert json.loads(res.stdout)["reasons"]["disagg"].startswith("does not fit")


def test_missing_data_is_named():
    res = _plan(*QWEN[:4], "--system", "l4", "--backend", "sglang", *QWEN[8:], "--tpot", "30", "--json", "--mode", "disagg")
    assert res.exit_code == 1
    reason = json.loads(res.stdout)["reasons"]["disagg"]
    assert "missing data" in reason and "gemm_perf" in reason and "l4" in reason


@pytest.mark.parametrize("extra", [["--mode", "both"], ["--top-n", "0"], ["--warehouse", "x"], ["--isl", "0"]])
def test_usage_errors_exit_2(extra):
    res = _plan(*QWEN, "--tpot", "30", *extra, "--json")
    assert res.exit_code == 2, res.output
    assert "error" in json.loads(res.stdout)


def test_a_terminal_sees_the_search_progress_and_json_stays_silent():
    import sys
    from pathlib import Path

    from tests.test_console import stderr_on_a_terminal

    perfledger = [str(Path(sys.executable).with_name("perfledger")), "plan", *QWEN, "--tpot", "30", "--mode", "agg",
                  "--top-n", "1"]
    code, drawn = stderr_on_a_terminal(perfledger)
    assert code == 0 and b"planning agg" in drawn and b"1/1" in drawn
    code, drawn = stderr_on_a_terminal([*perfledger, "--json"])
    assert code == 0 and b"planning" not in drawn
