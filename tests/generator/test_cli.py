"""`perfledger generate`: JSON contract, exit codes, --explain, and the files on disk."""

import json
import os
import stat

import yaml
from typer.testing import CliRunner

from perfledger.cli import app

from .conftest import EXAMPLES

RUNNER = CliRunner()


def invoke(*args):
    """`generate` with no warehouse (the default release's versions), unless the call names one."""
    return RUNNER.invoke(app, ["generate", *args], env={"PERFLEDGER_WAREHOUSE": "/nonexistent/perfledger-warehouse"})


def test_generate_json_contract_and_files(tmp_path):
    result = invoke(str(EXAMPLES / "vllm_disagg.yaml"), "--out", str(tmp_path), "--json",
                    "--set", "WorkerConfig.decode_workers=1", "--backend", "sglang", "--version", "0.5.11")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert set(payload) == {"files", "mode", "warnings"} and payload["mode"] == "disagg"
    names = {os.path.relpath(p, tmp_path) for p in payload["files"]}
    assert {"k8s_deploy.yaml", "run_0.sh", "generator_config.yaml", "bench_run.sh"} <= names
    assert os.stat(tmp_path / "run_0.sh").st_mode & stat.S_IXUSR
    cfg = yaml.safe_load((tmp_path / "generator_config.yaml").read_text())
    assert cfg["backend"] == "sglang" and cfg["WorkerConfig"]["decode_workers"] == 1


def test_invalid_input_exits_1_with_key_path(tmp_path):
    result = invoke(str(EXAMPLES / "vllm_agg.yaml"), "--out", str(tmp_path), "--json",
                    "--set", "Workers.agg.tensor_paralel_size=2")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"].startswith("Workers.agg.tensor_paralel_size: unknown worker key")


def test_bad_yaml_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("ServiceConfig:\n  model_path: [unclosed\n")
    result = invoke(str(bad), "--out", str(tmp_path / "o"))
    assert result.exit_code == 1 and f"{bad}:" in result.output


def test_duplicate_yaml_keys_are_errors(tmp_path):
    bad = tmp_path / "dup.yaml"
    bad.write_text("ServiceConfig:\n  model_path: a\n  model_path: b\n")
    result = invoke(str(bad), "--out", str(tmp_path / "o"))
    assert result.exit_code == 1 and "duplicate key 'model_path'" in result.output


def test_usage_errors_exit_2(tmp_path):
    assert invoke(str(EXAMPLES / "vllm_agg.yaml"), "--out", str(tmp_path), "--set", "nokey").exit_code == 2
    assert invoke(str(EXAMPLES / "vllm_agg.yaml")).exit_code == 2
    assert invoke("--bogus").exit_code == 2


def test_explain_text_and_json():
    text = invoke("--explain", "kv_cache_dtype")
    assert text.exit_code == 0 and "trtllm 1.0.0rc4..1.3.0rc23: kv_cache_config.dtype" in text.stdout
    info = json.loads(invoke("--explain", "Workers.decode.max_batch_size", "--json").stdout)
    assert info["flags"]["vllm"] == [{"flag": "--max-num-seqs", "versions": info["flags"]["vllm"][0]["versions"]}]
    assert invoke("--explain", "ServiceConfig.port").exit_code == 0
    missing = invoke("--explain", "ServiceConfig.prot")
    assert missing.exit_code == 1 and "did you mean 'ServiceConfig.port'" in missing.output


def test_regeneration_reports_removed_stale_files_in_json(tmp_path):
    assert invoke(str(EXAMPLES / "sglang_disagg.yaml"), "--out", str(tmp_path)).exit_code == 0
    result = invoke(str(EXAMPLES / "sglang_agg.yaml"), "--out", str(tmp_path), "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert any("removed stale cli_args_prefill.yaml" in w for w in payload["warnings"])
    assert not (tmp_path / "cli_args_prefill.yaml").exists()


def test_cli_and_pure_api_are_one_code_path(tmp_path):
    """Reference defect 4: the two entry points filtered keys differently; here the CLI writes exactly
    what render_document returns for the same input, byte for byte."""
    from perfledger.generator.api import build_document, render_document
    from perfledger.generator.yamlio import load_yaml_file

    source = EXAMPLES / "vllm_disagg_multinode.yaml"
    assert invoke(str(source), "--out", str(tmp_path), "--set", "WorkerConfig.decode_workers=3").exit_code == 0
    expected = render_document(build_document(load_yaml_file(source), ["WorkerConfig.decode_workers=3"]),
                               str(source)).files
    written = {str(p.relative_to(tmp_path)): p.read_text() for p in tmp_path.rglob("*")
               if p.is_file() and not p.name.startswith(".")}
    assert written == expected


def test_explain_shows_the_per_node_launch_flags():
    info = json.loads(invoke("--explain", "NodeConfig.master_port", "--json").stdout)
    vllm = {v: s for s in info["flags"]["vllm"] for v in s["versions"]}
    assert vllm["0.11.0"]["flag"] is None and "needs >= 0.12.0" in vllm["0.11.0"]["reason"]
    assert "--node-rank 1 --master-addr <addr> --master-port <port> --headless" in vllm["0.12.0"]["flag"]
    assert vllm["0.12.0"]["when"] == "(data_parallel_size or 1) == 1"
    assert "--dist-init-addr <addr>:<port>" in info["flags"]["sglang"][0]["flag"]
    assert info["flags"]["trtllm"][0]["flag"] is None and "MPI" in info["flags"]["trtllm"][0]["reason"]
    text = invoke("--explain", "NodeConfig.node_ips").stdout
    assert "(only when (data_parallel_size or 1) == 1)" in text


def test_a_rule_that_changes_an_input_value_is_a_warning_naming_both(tmp_path):
    """vllm_agg.yaml sets max_batch_size 256; the production rules deploy 512 (headroom): said, not silent."""
    result = invoke(str(EXAMPLES / "vllm_agg.yaml"), "--out", str(tmp_path / "a"), "--json")
    warned = [w for w in json.loads(result.stdout)["warnings"] if w.startswith("Workers.agg.max_batch_size")]
    assert warned == ["Workers.agg.max_batch_size: the input sets 256, rule generator/rules/production/vllm.rule:7 "
                      "makes it 512; set preserve_engine_limits: true to keep 256"]
    assert "--max-num-seqs 512" in (tmp_path / "a" / "run_0.sh").read_text()
    kept = invoke(str(EXAMPLES / "vllm_agg.yaml"), "--out", str(tmp_path / "b"), "--set", "preserve_engine_limits=true",
                  "--json")
    assert not [w for w in json.loads(kept.stdout)["warnings"] if "max_batch_size" in w]
    assert "--max-num-seqs 256" in (tmp_path / "b" / "run_0.sh").read_text()


def test_default_backend_version_follows_the_newest_data_the_warehouse_holds(tmp_path):
    """An input naming no version gets the newest Dynamo release pinning a version the warehouse holds."""
    from perfledger.generator.api import build_document
    from tests.warehouse.conftest import GEMM_HEADER, gemm_line, write_staging

    raw = {"backend": "vllm", "ServiceConfig": {"model_path": "m"}}
    assert build_document(raw, [], held_versions={"vllm": ["0.20.0", "0.24.0", "0.27.0"]})["generator_dynamo_version"] == "1.3.0"
    assert "generator_dynamo_version" not in build_document(raw, [], held_versions={"vllm": ["0.9.0"]})
    assert "generator_dynamo_version" not in build_document(raw, [], version="0.20.1", held_versions={"vllm": ["0.24.0"]})
    wh = tmp_path / "wh"
    folder = write_staging(tmp_path / "c", "gemm_perf", GEMM_HEADER, [gemm_line(1)],
                           batch={"system": "h200_sxm", "backend": "vllm", "version": "0.24.0"})
    assert RUNNER.invoke(app, ["ingest", str(folder), "--warehouse", str(wh)]).exit_code == 0
    for where, pinned in ((wh, "0.24.0"), (tmp_path / "none", "0.20.1")):  # no warehouse: the code's default release
        result = invoke(str(EXAMPLES / "vllm_agg.yaml"), "--out", str(tmp_path / f"o{pinned}"), "--warehouse", str(where),
                        "--json")
        assert result.exit_code == 0, result.output
        assert yaml.safe_load((tmp_path / f"o{pinned}" / "generator_config.yaml").read_text())["version"] == pinned
