"""`perfledger run` as a Prefect flow on small real sources (the wheel run is exercised by `make run`)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from perfledger.flows.config import ConfigError, load_pipeline_config
from perfledger.flows.pipeline import run_pipeline
from perfledger.settings import package_file
from perfledger.warehouse.store import Warehouse
from tests.flows.conftest import GEMM, scaled_copy, write_config

pytestmark = pytest.mark.xdist_group("prefect")
REPO = Path(__file__).resolve().parents[2]
DERIVED = ("validate", "ledger", "matrix", "estimate", "plan", "generate", "publish")
K3_QUESTION = {"model": "kimi-k3", "systems": ["h200_sxm"], "total_gpus": [16], "backend": "vllm", "version": "0.24.0",
               "isl": 4000, "osl": 500, "ttft": 2000, "tpot": 50}


def _status(result: dict) -> dict[str, str]:
    return {s["stage"]: s["status"] for s in result["stages"]}


def test_pipeline_ingests_builds_the_ledger_and_writes_the_summary(tmp_path: Path, prefect_server, shared_tree: Path) -> None:
    config_path = tmp_path / "pipeline.yaml"
    kda = shared_tree / "b200_sxm" / "kda"
    config_path.write_text(f"sources: ['{kda}']\nmodels: [kimi-k3]\nwarehouse: '{tmp_path / 'wh'}'\nout: '{tmp_path / 'out'}'\n")
    result = run_pipeline(load_pipeline_config(config_path))
    assert result["ingest"]["failed_batches"] == [] and result["ingest"]["tables"]["kda_perf"] > 0
    summary = Path(result["summary"]).read_text()
    assert "| kda_perf |" in summary and "## Ledger: moonshotai/Kimi-K3" in summary
    assert result["ledgers"][0]["by_status"].get("done", 0) >= 1


def test_full_pipeline_skips_unchanged_work_and_gates_regressions(tmp_path: Path, prefect_server, shared_tree: Path) -> None:
    out = tmp_path / "out"
    common = dict(models=["kimi-k3"], warehouse=tmp_path / "wh", out=out,
                  matrices=[{"path": str(REPO / ".." / "shared" / "aic" / "support_matrix" / "head-095f58a"), "label": "head"}],
                  deployments=[str(package_file("perfledger.generator", "examples", "vllm_agg.yaml"))], plans=[K3_QUESTION])
    kda, gemm = shared_tree / "b200_sxm" / "kda", shared_tree / GEMM / "0.24.0"
    cfg = load_pipeline_config(write_config(tmp_path / "a.yaml", sources=[str(kda), str(gemm)], **common))

    first = run_pipeline(cfg)
    assert set(_status(first).values()) == {"ran"} and first["gate"] == "no baseline"
    for page in ("index", "matrix", "validation", "diff", "estimates", "ledger-kimi-k3"):
        assert (out / f"{page}.html").is_file() and (out / f"{page}.md").is_file()
    assert (out / "deployments" / "vllm_agg" / "k8s_deploy.yaml").is_file()
    assert (out / "plots" / "coverage-kimi-k3.svg").read_text().startswith("<?xml")
    plans = Warehouse(tmp_path / "wh").read_table("plans")
    best = plans.filter(pl.col("kind") == "best").row(0, named=True)
    assert best["change"].startswith("first plan of moonshotai/Kimi-K3 on 16 × h200_sxm (vllm 0.24.0)")
    assert "Plans: moonshotai/Kimi-K3" in (out / "plan-moonshotai--kimi-k3.md").read_text()

    second = run_pipeline(cfg)
    assert second["ingest"]["new_batches"] == 0
    assert all(_status(second)[s] == "skipped" for s in DERIVED), second["stages"]

    # The same slice re-collected 20% slower: a new table version, the gate fails, the diff shows the moves.
    slower = scaled_copy(shared_tree, tmp_path / "recollected", "0.24.0", 1.2)
    third = run_pipeline(load_pipeline_config(write_config(tmp_path / "b.yaml", sources=[str(kda), str(slower)], **common)))
    assert third["ingest"]["new_batches"] == 1
    assert _status(third)["estimate"] == "ran" and _status(third)["generate"] == "skipped"
    assert third["gate"] == "fail"
    state = json.loads((out / ".pipeline" / "stages.json").read_text())
    rows = [r for r in state["estimate"]["result"]["gate"]["rows"] if r["system"] == "h200_sxm" and r["ms"] is not None]
    assert rows and all(r["verdict"] == "fail" and r["delta_pct"] == pytest.approx(20.0, abs=0.5) for r in rows)
    diff = (out / "diff.md").read_text()
    assert "gemm_perf: before " in diff and "107,225 changed" in diff and "107,225 rows moved more than 5%" in diff
    assert Warehouse(tmp_path / "wh").table_version("gemm_perf", curated=True) == 1
    # The plan was asked again over the new data and compared with the stored one through time travel: its note names
    # the batch that arrived in between.
    wh = Warehouse(tmp_path / "wh")
    assert _status(third)["plan"] == "ran" and wh.table_version("plans") == 1
    new = wh.read_table("batches").filter(pl.col("source").str.contains("recollected"))["batch_id"].to_list()
    best = wh.read_table("plans").filter(pl.col("kind") == "best").row(0, named=True)
    assert best["compared_with"] == 0 and best["batches_since"] == new[0]
    assert best["change"].startswith("moonshotai/Kimi-K3 on 16 × h200_sxm (vllm 0.24.0)") or "best config" in best["change"]
    assert best["change"].endswith(f"after batch {new[0]}")


def test_config_errors_name_the_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("sources: [aic-package]\nmodel: [kimi-k3]\n")
    with pytest.raises(ConfigError, match=r"p.yaml: unknown key\(s\) \['model'\]"):
        load_pipeline_config(bad)
    bad.write_text("sources: [aic-package]\nmatrices: [{path: x}]\n")
    with pytest.raises(ConfigError, match=r"p.yaml: matrices\[0\] needs keys 'path' and 'label'"):
        load_pipeline_config(bad)
    bad.write_text("sources: [aic-package]\nstages: [ingest, bake]\n")
    with pytest.raises(ConfigError, match=r"p.yaml: stages: unknown stage\(s\) \['bake'\]"):
        load_pipeline_config(bad)
    bad.write_text("sources: [aic-package]\ngate: {warn_pct: 20, fail_pct: 10}\n")
    with pytest.raises(ConfigError, match="warn_pct <= fail_pct"):
        load_pipeline_config(bad)


@pytest.mark.parametrize(("scenario", "message"), [
    ("kimi-k3:\n  - {name: p, phase: warmup, tokens: 8, ops: [], deploy: {tp: 8}}\n",
     "kimi-k3[0].phase: 'warmup' is not one of"),
    ("kimi-k3:\n  - {name: p, phase: prefill, tokens: 8, deploy: {tp: 8}, ops: [{op: gemm, n: hiden, k: hidden}]}\n",
     r"kimi-k3[0] (p).ops[0].n: unknown name 'hiden'"),
    ("kimi-k3:\n  - {name: p, phase: prefill, tokens: 8, deploy: {tp: 8}, ops: [{op: gemm, n: 8, k: 8, count: 200}]}\n",
     "kimi-k3[0] (p).ops[0].count: 200 exceeds the model's 93 layers"),
    ("kimi-k33:\n  - {name: s, kind: static, batch: 1, isl: 8, osl: 8, deploy: {tp: 8}}\n", "kimi-k33: "),
])
def test_a_bad_scenario_file_fails_the_config_before_anything_runs(tmp_path: Path, scenario: str, message: str) -> None:
    import re

    from typer.testing import CliRunner

    from perfledger.cli import app

    (tmp_path / "scenarios.yaml").write_text(scenario)
    config = tmp_path / "p.yaml"
    config.write_text(f"sources: [aic-package]\nwarehouse: '{tmp_path / 'wh'}'\nout: '{tmp_path / 'out'}'\n"
                      "scenarios: scenarios.yaml\n")
    where = f"{config}: scenarios: {tmp_path / 'scenarios.yaml'}: "
    with pytest.raises(ConfigError, match=re.escape(where + message)):
        load_pipeline_config(config)
    result = CliRunner().invoke(app, ["run", "--config", str(config)])
    assert result.exit_code == 2 and where + message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "wh").exists() and not (tmp_path / "out").exists()  # nothing ran


@pytest.mark.parametrize(("entry", "message"), [
    ("{model: kimi-k3, systems: [h200_sxm], total_gpus: 16, backend: vllm, isl: 8, osl: 8, ttft: 1, tpot: 1, slo: 2}",
     r"plans[0]: unknown key(s) ['slo']"),
    ("{model: Org/NoSuchModel, systems: [h200_sxm], total_gpus: 8, backend: vllm, isl: 8, osl: 8, ttft: 1, tpot: 1}",
     "plans[0].model: 'Org/NoSuchModel' is neither a lane spec nor a model the estimator knows"),
])
def test_a_bad_planning_question_fails_the_config_with_exit_2(tmp_path: Path, entry: str, message: str) -> None:
    from typer.testing import CliRunner

    from perfledger.cli import app

    config = tmp_path / "p.yaml"
    config.write_text(f"sources: [aic-package]\nwarehouse: '{tmp_path / 'wh'}'\nout: '{tmp_path / 'out'}'\nplans:\n  - {entry}\n")
    result = CliRunner().invoke(app, ["run", "--config", str(config)])
    assert result.exit_code == 2 and f"{config}: {message}" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "wh").exists()


def test_embedded_default_needs_only_the_install() -> None:
    cfg = load_pipeline_config()
    assert cfg.sources == ["aic-package"] and cfg.models == ["kimi-k3"]
    assert all(Path(d).is_file() for d in cfg.deployments) and cfg.scenarios.is_file()
    assert cfg.matrices == [{"path": "aic-package", "label": "aic-package"}]
    asked = {(p["question"]["model"], p["question"]["total_gpus"]) for p in cfg.plans}
    assert asked == {("Qwen/Qwen3-32B", 8), ("moonshotai/Kimi-K3", 16)}


def test_config_paths_resolve_against_the_file_folder(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    config = write_config(folder / "p.yaml", sources=["landing", "aic-package"], warehouse="wh",
                          matrices=[{"path": "snapshots/head", "label": "head"}],
                          deployments=["package://perfledger.generator/examples/vllm_agg.yaml", "mine.yaml"])
    cfg = load_pipeline_config(config)
    assert cfg.sources == [str(folder / "landing"), "aic-package"] and cfg.warehouse == folder / "wh"
    assert cfg.matrices == [{"path": str(folder / "snapshots" / "head"), "label": "head"}]
    assert cfg.deployments == [str(package_file("perfledger.generator", "examples", "vllm_agg.yaml")),
                               str(folder / "mine.yaml")]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PERFLEDGER_HOME", str(tmp_path / "state"))
    cli = load_pipeline_config(config, warehouse="cli-wh", out=Path("cli-out"))
    assert cli.warehouse == tmp_path / "cli-wh" and cli.out == tmp_path / "cli-out"
    assert load_pipeline_config(config).out == tmp_path / "state" / "reports"
