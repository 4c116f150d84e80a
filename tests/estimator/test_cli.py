"""`perfledger estimate ...`: JSON shape, per-line output for --queries, exit codes 0/1/2."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from perfledger.cli import app

pytestmark = pytest.mark.aic
H200 = ["--system", "h200_sxm", "--backend", "trtllm", "--version", "1.3.0rc20", "--data", "aic-package"]


def _run(*args):
    return CliRunner().invoke(app, ["estimate", *args])


def test_gemm_json_matches_worked_example():
    res = _run("gemm", *H200, "--quant", "bfloat16", "--m", "1000", "--n", "5000", "--k", "3000", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out) == {"latency_ms", "sol_ms", "source", "energy_wms", "power_w"}
    assert out["latency_ms"] == pytest.approx(0.0412548, rel=1e-5) and out["source"] == "silicon"
    assert out["energy_wms"] is None and out["power_w"] is None  # the table holds no power column


def test_hybrid_quant_transfer_label():
    res = _run("gemm", *H200, "--quant", "int4_wo", "--m", "4096", "--n", "4096", "--k", "4096", "--mode", "hybrid", "--json")
    out = json.loads(res.stdout)
    assert out["source"] == "xprofile" and out["latency_ms"] == pytest.approx(0.272940, rel=1e-5)


def test_fp8_static_low_precision_input_flag_matches_reference(oracle):
    """fp8_static at an on-grid (m, k): fp8 minus compute_scale, and minus scale_matrix with the flag."""
    for flag in ([], ["--low-precision-input"]):
        res = _run("gemm", *H200, "--quant", "fp8_static", "--m", "4096", "--n", "4096", "--k", "4096", *flag, "--json")
        assert res.exit_code == 0, res.output
        ref, _ = oracle.gemm("h200_sxm", "trtllm", "1.3.0rc20", "fp8_static", 4096, 4096, 4096, low_precision_input=bool(flag))
        assert json.loads(res.stdout)["latency_ms"] == pytest.approx(ref, rel=1e-9)


def test_missing_quant_exits_1_and_names_it():
    res = _run("gemm", *H200, "--quant", "int4_wo", "--m", "64", "--n", "4096", "--k", "4096", "--json")
    assert res.exit_code == 1 and "int4_wo" in json.loads(res.stdout)["error"]


def test_unknown_system_exits_1():
    res = _run("gemm", "--system", "h999", "--backend", "trtllm", "--version", "x", "--data", "aic-package",
               "--quant", "bfloat16", "--m", "1", "--n", "64", "--k", "64")
    assert res.exit_code == 1 and "h999" in res.output
    assert "known systems: " in res.output and "h200_sxm" in res.output and "query_versions" not in res.output


def test_usage_errors_exit_2():
    assert _run("gemm", *H200, "--quant", "bfloat16", "--m", "1", "--n", "64").exit_code == 2
    assert _run("gemm", *H200, "--quant", "bfloat16", "--m", "1", "--n", "64", "--k", "64", "--mode", "nope").exit_code == 2
    assert _run("gemm", *H200, "--m", "abc").exit_code == 2


def test_queries_file_prints_one_object_per_line(tmp_path):
    csv = tmp_path / "q.csv"
    csv.write_text("quant,m,n,k\nbfloat16,4096,4096,4096\nfp8,100,5000,3000\nint4_wo,1,64,64\n")
    res = _run("gemm", *H200, "--queries", str(csv), "--json")
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert res.exit_code == 1 and len(lines) == 3
    assert lines[0]["latency_ms"] == pytest.approx(0.175461, rel=1e-5)
    assert "error" in lines[2] and "int4_wo" in lines[2]["error"]


def test_moe_and_comm_commands():
    res = _run("moe", *H200, "--quant", "fp8", "--hidden", "4096", "--inter", "1536", "--topk", "8", "--experts", "128",
               "--moe-ep", "8", "--tokens", "3000", "--mode", "sol", "--json")
    assert json.loads(res.stdout) == {"latency_ms": pytest.approx(0.07091456), "sol_ms": pytest.approx(0.07091456),
                                      "source": "sol", "energy_wms": None, "power_w": None}
    for old_spelling in ("--tp", "--ep"):  # renamed as `estimate static` names them; no hidden alias
        refused = _run("moe", *H200, "--quant", "fp8", "--hidden", "4096", "--inter", "1536", "--topk", "8",
                       "--experts", "128", old_spelling, "8", "--tokens", "3000", "--mode", "sol")
        assert refused.exit_code == 2 and "No such option" in refused.output and repr(old_spelling) in refused.output
    res = _run("comm", "--system", "h200_sxm", "--op", "all_gather", "--num-gpus", "6", "--elements", "1000",
               "--data", "aic-package", "--json")
    assert res.exit_code == 1 and "num_gpus=6" in json.loads(res.stdout)["error"]


def test_comm_takes_backend_and_version_and_says_they_do_not_matter():
    comm = ["comm", "--system", "h200_sxm", "--op", "all_gather", "--num-gpus", "8", "--elements", "1000000",
            "--data", "aic-package"]
    answers = [_run(*comm, *extra, "--json") for extra in ([], ["--backend", "vllm", "--version", "0.24.0"],
                                                            ["--backend", "trtllm", "--version", "1.3.0rc20"])]
    assert all(a.exit_code == 0 for a in answers), answers[0].output
    first = json.loads(answers[0].stdout)
    assert first["latency_ms"] == pytest.approx(0.0239217, rel=1e-5) and first["note"].startswith("NCCL data is per system")
    assert all(json.loads(a.stdout) == first for a in answers)
    assert "note: NCCL data is per system" in _run(*comm, "--backend", "vllm").stdout


def test_static_prices_kimi_k3_like_the_reference_and_a_backend_without_a_plan_exits_1(oracle):
    k3 = ["static", "--model", "moonshotai/Kimi-K3", "--system", "h200_sxm", "--backend", "vllm", "--version", "0.24.0",
          "--tp", "8", "--moe-ep", "8", "--batch", "8", "--isl", "4000", "--osl", "200", "--data", "aic-package", "--json"]
    res = _run(*k3)
    assert res.exit_code == 0, res.output
    ttft, gen_ms, _ = oracle.EngineHandle.compile("moonshotai/Kimi-K3", "h200_sxm", "vllm", backend_version="0.24.0", tp_size=8,
                                                  moe_tp_size=1, moe_ep_size=8).run_static(batch_size=8, isl=4000, osl=200)
    out = json.loads(res.stdout)
    assert out["ttft_ms"] == pytest.approx(ttft, rel=1e-9) and out["tpot_ms"] == pytest.approx(gen_ms / 199, rel=1e-9)
    res = _run(*[a if a not in ("h200_sxm", "vllm", "0.24.0") else {"h200_sxm": "l40s", "vllm": "sglang", "0.24.0": "0.5.14"}[a]
                 for a in k3])
    assert res.exit_code == 0 and json.loads(res.stdout)["ttft_ms"] == pytest.approx(95131.41505861287, rel=1e-9)
    res = _run(*[a if a not in ("vllm", "0.24.0") else {"vllm": "trtllm", "0.24.0": "1.3.0rc20"}[a] for a in k3])
    assert res.exit_code == 1 and "no moe_perf slice" in res.output and "experts=896" in res.output  # trtllm SILICON miss


def test_static_reports_memory_per_gpu_and_says_when_it_does_not_fit():
    """The memory object is the parity-checked memory model at the static run's deployment and quants."""
    from perfledger.estimator.models.memory import static_memory

    qwen = ["static", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--version", "0.24.0",
            "--tp", "2", "--batch", "8", "--isl", "1000", "--osl", "100", "--data", "aic-package"]
    out = json.loads(_run(*qwen, "--json").stdout)
    mem = out["memory"]
    assert mem == static_memory("Qwen/Qwen3-32B", "h200_sxm", "vllm", tp=2, moe_tp=1, moe_ep=1, quants=out["quants"],
                                batch=8, isl=1000, osl=100, version="0.24.0")
    assert mem["fits"] and 0 < mem["weights"] < mem["total"] < mem["capacity"] == 141.0
    assert "GiB per GPU" in _run(*qwen).stdout
    k3 = ["static", "--model", "moonshotai/Kimi-K3", "--system", "h200_sxm", "--backend", "vllm", "--version", "0.24.0",
          "--tp", "8", "--moe-ep", "8", "--batch", "8", "--isl", "4000", "--osl", "200", "--data", "aic-package"]
    res = _run(*k3)
    assert res.exit_code == 0 and "(does not fit)" in res.stdout


def test_static_model_config_path_prices_like_the_name_and_a_bad_path_exits_1(tmp_path):
    """--model-config reads an HF config.json (or a folder with one, plus its hf_quant_config.json) instead of
    looking --model up: the same checkpoint gives the same TTFT, TPOT, quants and memory as its name."""
    from perfledger.estimator.models.config import config_file, hf_quant_path

    args = ["--system", "h200_sxm", "--backend", "trtllm", "--version", "1.3.0rc20", "--tp", "2", "--batch", "4",
            "--isl", "1000", "--osl", "50", "--data", "aic-package", "--json"]
    model = "Qwen/Qwen3-32B-FP8-Static-PerTensor"  # quants read from its ModelOpt hf_quant_config.json
    by_name = _run("static", "--model", model, *args)
    assert by_name.exit_code == 0, by_name.output
    folder = tmp_path / "ckpt"
    folder.mkdir()
    source = config_file(model)
    (folder / "config.json").write_text(source.read_text())
    (folder / "hf_quant_config.json").write_text(hf_quant_path(source).read_text())
    named = json.loads(by_name.stdout)
    by_folder, by_file = (json.loads(_run("static", "--model-config", str(path), *args).stdout) for path in (folder, source))
    assert named == by_folder == by_file and named["quants"]["gemm"] == {"quant": "fp8_static", "source": "checkpoint"}
    missing = _run("static", "--model-config", str(tmp_path / "nope"), *args)
    assert missing.exit_code == 1 and "--model-config" in missing.output and "does not exist" in missing.output
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _run("static", "--model-config", str(empty), *args).exit_code == 1
    assert _run("static", *args).exit_code == 2  # neither --model nor --model-config


K3_STATIC = ["static", "--system", "h200_sxm", "--backend", "vllm", "--version", "0.24.0", "--tp", "8", "--moe-ep", "8",
             "--batch", "8", "--isl", "4000", "--osl", "200", "--data", "aic-package"]


def test_static_model_by_lane_name_hf_id_or_config_path_is_one_answer(shared_tree):
    config = shared_tree.parents[2] / "model_configs" / "moonshotai--Kimi-K3_config.json"
    answers = [json.loads(_run(*K3_STATIC, "--model", m, "--json").stdout)["ttft_ms"]
               for m in ("kimi-k3", "moonshotai/Kimi-K3", "moonshotai/kimi-k3", str(config))]
    assert len(set(answers)) == 1
    unknown = _run(*K3_STATIC, "--model", "kimi-k4")
    assert unknown.exit_code == 1 and "did you mean" in unknown.stderr and "kimi-k3" in unknown.stderr


def test_static_breakdown_names_units_and_gives_decode_per_step_and_total():
    res = _run(*K3_STATIC, "--model", "kimi-k3", "--breakdown", "--json")
    out = json.loads(res.stdout)
    b = out["breakdown"]
    assert b["unit"] == "ms" and b["decode_steps"] == 199
    assert sum(v["context"] or 0 for v in b["ops"].values()) == pytest.approx(out["ttft_ms"])
    assert sum(v["decode_per_step"] or 0 for v in b["ops"].values()) == pytest.approx(out["tpot_ms"])
    moe = b["ops"]["moe"]
    assert moe["decode_total"] == pytest.approx(moe["decode_per_step"] * 199)
    human = _run(*K3_STATIC, "--model", "kimi-k3", "--breakdown")
    header = next(line for line in human.stdout.splitlines() if line.startswith("op"))
    assert "context ms" in header and "decode ms/step" in header and "decode ms (199 steps)" in header
    assert "TTFT 4,460.4 ms" in human.stdout and not re.search(r"\d\.\d{7,}", human.stdout)  # no 17-digit floats


MOE = ["moe", *H200, "--quant", "fp8", "--hidden", "4096", "--inter", "1536", "--topk", "8", "--experts", "128",
       "--tokens", "3000"]


def test_explain_miss_names_the_slices_that_exist_and_whether_hybrid_answers():
    res = _run(*MOE, "--moe-ep", "3", "--explain-miss")
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "--moe-ep 3 not collected; nearest slices have: 1, 2, 4, 8, 16, 32, 64, 128" in res.stderr
    assert "hint: --mode hybrid" in res.stderr
    doc = json.loads(_run(*MOE, "--moe-ep", "3", "--explain-miss", "--json").stdout)
    assert doc["explain"]["differs"] == {"ep": ["1", "2", "4", "8", "16", "32", "64", "128"]}
    assert {s["moe_ep_size"] for s in doc["explain"]["nearest"]} == {1, 2, 4, 8, 16, 32, 64, 128}
    gemm = json.loads(_run("gemm", *H200, "--quant", "int4_wo", "--m", "64", "--n", "4096", "--k", "4096",
                           "--explain-miss", "--json").stdout)["explain"]
    assert gemm["differs"] == {"quant": ["bfloat16", "fp8", "fp8_block"]}
    assert gemm["hint"].startswith("--mode hybrid answers it:") and "xprofile" in gemm["hint"]


def test_slices_lists_grid_ranges_and_filters():
    doc = json.loads(CliRunner().invoke(app, ["slices", "comm", "--system", "h200_sxm", "--data", "aic-package",
                                              "--where", "op=all_gather", "--where", "quant=half", "--json"]).stdout)
    assert [s["num_gpus"] for s in doc["slices"]] == [2, 4, 8]
    assert all(s["message_size_min"] < s["message_size_max"] for s in doc["slices"])
    human = CliRunner().invoke(app, ["slices", "moe", *H200, "--where", "quant=fp8", "--where", "hidden=4096"])
    assert human.exit_code == 0 and "num_tokens range (points)" in human.stdout and "1..16,384 (27)" in human.stdout
    later = json.loads(CliRunner().invoke(app, ["slices", "gemm", "--system", "h200_sxm", "--backend", "vllm",
                                                "--version", "9.9", "--data", "aic-package", "--json"]).stdout)
    assert {s["from"] for s in later["slices"]} == {"0.24.0"}  # an unknown later version reads the newest earlier one
    assert CliRunner().invoke(app, ["slices", "gemm", "--system", "h200_sxm"]).exit_code == 2  # per backend version
    assert CliRunner().invoke(app, ["slices", "nope", "--system", "h200_sxm"]).exit_code == 2
    assert CliRunner().invoke(app, ["slices", "moe", *H200, "--where", "colour=red"]).exit_code == 2


def test_static_explain_miss_says_whether_hybrid_prices_it():
    qwen = ["static", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "trtllm", "--version", "1.3.0rc20",
            "--tp", "3", "--batch", "8", "--isl", "4000", "--osl", "200", "--data", "aic-package"]
    plain, explained = _run(*qwen), _run(*qwen, "--explain-miss")
    assert plain.exit_code == explained.exit_code == 1 and "have [2, 4, 8]" in plain.stderr and "hint" not in plain.stderr
    assert len(explained.stderr.splitlines()) == 1 and "hint: --mode hybrid finds no neighbour either" in explained.stderr


def test_help_marks_query_options_required_unless_queries_gives_them():
    gemm, comm = (CliRunner().invoke(app, ["estimate", op, "--help"], env={"COLUMNS": "250"}).stdout for op in ("gemm", "comm"))
    line = next(line for line in gemm.splitlines() if "--backend" in line)
    assert "(required unless --queries has the column)" in line
    line = next(line for line in comm.splitlines() if "--backend" in line)
    assert "required" not in line  # comm takes --backend for symmetry only


def test_moe_json_carries_measured_energy(oracle, monkeypatch):
    """b200 vLLM 0.22.0's MoE table holds power: the JSON answer carries 0.12.0's energy and power = energy / latency."""
    from aiconfigurator_core.sdk.operations import MoE

    monkeypatch.setenv("AIC_ALLOW_UNLISTED_VERSIONS", "1")
    res = _run("moe", "--system", "b200_sxm", "--backend", "vllm", "--version", "0.22.0", "--data", "aic-package",
               "--quant", "fp8_block", "--hidden", "7168", "--inter", "2048", "--topk", "8", "--experts", "256",
               "--distribution", "balanced", "--tokens", "12", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    op = MoE("moe", 1.0, 7168, 2048, 8, 256, 1, 1, oracle.common.MoEQuantMode.fp8_block, "balanced", 1, is_gated=True)
    _, ms, energy, _ = oracle.handle("b200_sxm", "vllm", "0.22.0").evaluate_ops_json(
        oracle.build([op]), is_context=True, batch_size=1, s=1, x=12)[0]
    assert out["latency_ms"] == pytest.approx(ms, rel=1e-9) and out["energy_wms"] == pytest.approx(energy, rel=1e-9)
    assert out["power_w"] == pytest.approx(energy / ms, rel=1e-9)
    text = _run("moe", "--system", "b200_sxm", "--backend", "vllm", "--version", "0.22.0", "--data", "aic-package",
                "--quant", "fp8_block", "--hidden", "7168", "--inter", "2048", "--topk", "8", "--experts", "256",
                "--distribution", "balanced", "--tokens", "12")
    assert "energy" in text.stdout and "W·ms" in text.stdout
