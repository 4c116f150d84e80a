"""`matrix build` with the real estimator over a small real warehouse (h200 vLLM 0.24.0 from ../shared)."""

import json

import polars as pl
import pytest
from typer.testing import CliRunner

from estimator.specs import load_spec
from ledger.matrix.build import combinations, hw_gap, need_queries, weakest
from ledger.matrix.rules import load_rules
from ledger.specs import find_spec
from perfledger.cli import app
from tests.ledger.curated import SHARED_DATA
from warehouse.ingest import ingest
from warehouse.store import Warehouse

pytestmark = pytest.mark.xdist_group("ledger-test_matrix_build")

FOLDERS = ["h200_sxm/gemm/vllm/0.24.0", "h200_sxm/moe/vllm/0.24.0", "h200_sxm/mla_bmm/vllm/0.24.0",
           "h200_sxm/attention/vllm/0.24.0", "h200_sxm/comm/vllm/0.24.0", "h200_sxm/comm/nccl/2.26.2"]
RULES = load_rules()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("wh-matrix")
    assert not ingest([str(SHARED_DATA / f) for f in FOLDERS], Warehouse(root)).failed_batches
    return root


@pytest.fixture(scope="module")
def built(root):
    models = ["deepseek-v3", "kimi-k3", "qwen3-235b-a22b"]
    result = CliRunner().invoke(app, ["matrix", "build", *models, "--warehouse", str(root), "--json"])
    assert result.exit_code == 0, result.stdout
    from ledger.matrix.store import read_snapshot

    return json.loads(result.stdout.strip().splitlines()[-1]), read_snapshot(Warehouse(root), "perfledger")[1]


def test_pass_when_every_need_is_priced_from_collected_data(built):
    summary, frame = built
    assert summary["label"] == "perfledger" and summary["rows"] == 6  # 3 models x 1 combination x 2 modes
    qwen = frame.filter(pl.col("HuggingFaceID") == "Qwen/Qwen3-235B-A22B")  # GQA + MoE: every op has a model
    assert qwen.select("System", "Backend", "Version", "Status", "Source").unique().rows() == [
        ("h200_sxm", "vllm", "0.24.0", "PASS", "silicon")]
    assert sorted(qwen["Mode"]) == ["agg", "disagg"]


def test_hybrid_pass_carries_the_weakest_tier(root):
    import dataclasses

    from estimator.batch import estimate
    from estimator.context import Estimator
    from estimator.sources import WarehouseSource
    from ledger.matrix.build import build_rows

    qwen = find_spec("qwen3-235b-a22b")  # no w4a16_mxfp4 MoE of this shape on h200: the MoE needs an xshape transfer
    mxfp4 = dataclasses.replace(qwen, matrix=dataclasses.replace(qwen.matrix, quant={**qwen.matrix.quant, "moe": "w4a16_mxfp4"}))
    est = Estimator(WarehouseSource(root))
    rows = build_rows(mxfp4, [("h200_sxm", "vllm", "0.24.0")], lambda op, q, mode: estimate(est, op, q, mode=mode),
                      {"h200_sxm": load_spec("h200_sxm").flops}, {})
    assert rows.select("Mode", "Status", "ErrMsg", "Source").rows() == [("agg", "HYBRID_PASS", "", "xshape"),
                                                                         ("disagg", "HYBRID_PASS", "", "xshape")]


def test_an_op_the_estimator_lacks_is_a_fail_that_says_so(built):
    _, frame = built
    v3 = frame.filter(pl.col("HuggingFaceID") == "deepseek-ai/DeepSeek-V3").row(0, named=True)
    assert v3["Status"] == "FAIL" and v3["Source"] == ""  # was PASS when only MoE and one GEMM were asked
    assert v3["ErrMsg"].startswith("mla_context_attention (context, mla_context_module_perf): "
                                   "the estimator has no 'mla_context' op model")
    assert "mla_generation_attention/generation" in v3["ErrMsg"]


def test_fail_names_the_first_missing_need_then_the_rest(built):
    _, frame = built
    k3 = frame.filter(pl.col("HuggingFaceID") == "moonshotai/Kimi-K3").row(0, named=True)
    assert k3["Status"] == "FAIL" and k3["Source"] == ""
    assert k3["ErrMsg"].count("the estimator has no") == 1  # the first reason in full, the others by name
    assert "kda_attention/context" in k3["ErrMsg"] and "lane kda" in k3["ErrMsg"]
    assert "moe_experts" not in k3["ErrMsg"]  # K3's MoE shape is collected on h200 vLLM 0.24.0


def test_a_data_gap_names_the_table_and_slice():
    from estimator.errors import NoDataError
    from ledger.matrix.build import Pricer
    from ledger.matrix.needs import Need

    def estimate(op, q, mode):
        raise NoDataError(f"no moe_perf slice for quant={q['quant'][0]}")

    need = Need("moe_experts", "moe", "moe_perf", "context", (("quant", "nvfp4"), ("tokens", 256)))
    tier, err = Pricer(estimate, frozenset({"moe"}), RULES.source_tiers).need(need, ("h200_sxm", "vllm", "0.24.0"))
    assert tier is None and err == "moe_experts (context, moe_perf): no moe_perf slice for quant=nvfp4"


def test_hw_rule_uses_the_system_spec():
    v3 = find_spec("deepseek-v3")
    assert hw_gap(v3, "a100_sxm", load_spec("a100_sxm").flops) == "a100_sxm has no FP8 tensor cores, required by deepseek-ai/DeepSeek-V3"
    assert hw_gap(v3, "h100_sxm", load_spec("h100_sxm").flops) is None
    assert hw_gap(v3, "b60", {}) is None  # listed in rules.yaml as emulating fp8 in software
    k3 = find_spec("kimi-k3")  # rules.yaml unsupported_quants: SM89 kernels cannot run MXFP4 MoE
    assert hw_gap(k3, "l40s", load_spec("l40s").flops) == "l40s kernels do not support moe quant w4a16_mxfp4, required by moonshotai/Kimi-K3"
    assert hw_gap(k3, "h100_sxm", load_spec("h100_sxm").flops) is None


def test_hw_rule_takes_dtypes_from_quant_labels_fp4_named_first():
    import dataclasses

    from ledger.matrix.build import required_dtypes

    v3 = find_spec("deepseek-v3")
    nvfp4 = dataclasses.replace(v3, matrix=dataclasses.replace(v3.matrix, requires=(), quant={"gemm": "fp8_block", "moe": "nvfp4"}))
    assert required_dtypes(nvfp4) == ["fp4", "fp8"]
    assert hw_gap(nvfp4, "h100_sxm", load_spec("h100_sxm").flops) == "h100_sxm has no FP4 tensor cores, required by deepseek-ai/DeepSeek-V3"
    assert required_dtypes(find_spec("kimi-k3")) == []  # w4a16_mxfp4 runs on bf16 tensor cores


def test_pinned_lane_versions_serve_other_versions():
    from ledger.matrix.build import lane_versions

    k3 = find_spec("kimi-k3")
    assert lane_versions(k3, "kda", ("gb300", "vllm", "0.24.0")) == ["0.24.0", "0.1.dev19262"]
    assert lane_versions(k3, "mla_bmm.96fam", ("h200_sxm", "sglang", "0.5.16")) == ["0.5.16"]  # sglang only on b200
    assert lane_versions(k3, "mla_bmm.96fam", ("b200_sxm", "sglang", "0.5.16")) == ["0.5.16", "0.5.14"]


def test_helpers():
    from ledger.specs import OpNeed

    assert weakest(["silicon", "xprofile", "xshape"], RULES.source_tiers) == "xprofile"
    need = OpNeed("gemm", {"quant": "bfloat16"}, {"m": (1, 64, 512), "n": (7168,), "k": (12288,)})
    q = need_queries(need, "b200_sxm", "sglang", "0.5.16")
    assert q.height == 3 and set(q["quant"]) == {"bfloat16"} and q["m"].to_list() == [1, 64, 512]
    parts = pl.DataFrame({"system": ["h200_sxm", "h200_sxm", "a100_sxm"], "backend": ["vllm", "nccl", "vllm"],
                          "version": ["0.24.0", "2.23", "0.14.0"]})
    assert combinations(parts, find_spec("kimi-k3"), RULES) == [("h200_sxm", "vllm", "0.24.0")]


def test_disagreements_with_the_imported_matrix(built):
    from ledger.matrix.explain import model_disagreements
    from ledger.matrix.reader import read_matrix
    from tests.ledger.curated import MATRIX_STATES

    _, ours = built
    head = read_matrix(MATRIX_STATES / "head-095f58a")
    same = model_disagreements(ours, head, "moonshotai/Kimi-K3")  # both FAIL on h200 vLLM 0.24.0, for other reasons
    assert (same["agree"], same["disagree"], same["only_ours"], same["only_imported"]) == (2, [], 0, 234)
    flipped = ours.with_columns(Status=pl.lit("PASS"), ErrMsg=pl.lit(""), Source=pl.lit("silicon"))
    diff = model_disagreements(flipped, head, "moonshotai/Kimi-K3")["disagree"]
    assert [(d["Mode"], d["imported"], d["ours"], d["reason"]) for d in diff] == [
        ("agg", "FAIL", "PASS", "silicon"), ("disagg", "FAIL", "PASS", "silicon")]
    assert "does not fit in GPU memory" in diff[0]["imported_reason"]
    flipped_reasons = model_disagreements(flipped, head, "moonshotai/Kimi-K3")["by_reason"]
    assert flipped_reasons[0] == {"transition": "only imported", "keys": 234,
                                  "reason": "key not in our warehouse (no collected partition for that backend/version)"}
    assert flipped_reasons[1] == {"transition": "FAIL → PASS", "reason": "imported: model does not fit in GPU memory", "keys": 2}
    assert same["by_reason"] == flipped_reasons[:1]


def test_reasons_bucket_both_sides():
    from ledger.matrix.explain import reason_of

    assert reason_of("FAIL", "mla_context_attention (context, mla_context_module_perf): the estimator has no "
                     "'mla_context' op model [+1 more unpriced: x]", "") == "estimator has no mla_context op model"
    assert reason_of("FAIL", "moe_experts (context, moe_perf): no moe_perf slice for quant=nvfp4", "") == \
        "no moe_perf slice for the query"
    assert reason_of("FAIL", "lane kda (kda_perf): no collected rows for l40s/vllm at 0.24.0", "") == \
        "lane kda has no collected rows"
    assert reason_of("FAIL", "Traceback ...\\nValueError: Unsupported moe quant mode 'nvfp4' for system=h100_sxm", "") == \
        "unsupported moe quant nvfp4"
    assert reason_of("FAIL", "qkv_proj (context, gemm_perf): no gemm_perf rows for b200_sxm/sglang/0.5.10 in warehouse w", "") == \
        "no gemm_perf rows for that system/backend/version"
    assert reason_of("HW_INCOMPATIBLE", "l40s kernels do not support moe quant w4a16_mxfp4, required by m", "") == \
        "hardware: kernels lack moe quant w4a16_mxfp4"
    assert reason_of("HYBRID_PASS", "", "xshape") == "HYBRID_PASS (xshape)"
    assert reason_of("FAIL", "Traceback\\nKeyError: 'x'", "") == "FAIL: KeyError: 'x'"


def test_the_command_column_replays_one_row(root, built):
    import shlex

    _, frame = built
    row = frame.filter(pl.col("HuggingFaceID") == "Qwen/Qwen3-235B-A22B").row(0, named=True)
    argv = shlex.split(row["Command"])
    assert argv[:3] == ["perfledger", "matrix", "build"] and argv[-1] == "--no-store"
    result = CliRunner().invoke(app, [*argv[1:], "--warehouse", str(root), "--json"])
    assert result.exit_code == 0, result.stdout
    replay = json.loads(result.stdout)
    assert [(r["Mode"], r["Status"], r["Source"]) for r in replay["matrix"]] == [("agg", "PASS", "silicon"),
                                                                               ("disagg", "PASS", "silicon")]


def test_a_filtered_build_never_replaces_the_full_snapshot(root):
    runner = CliRunner()
    refused = runner.invoke(app, ["matrix", "build", "qwen3-235b-a22b", "--system", "h200_sxm", "--warehouse", str(root), "--json"])
    assert refused.exit_code == 2 and "replace the full 'perfledger' snapshot" in refused.stdout
    nothing = runner.invoke(app, ["matrix", "build", "qwen3-235b-a22b", "--system", "b200_sxm", "--no-store",
                                  "--warehouse", str(root), "--json"])
    assert nothing.exit_code == 2 and "no warehouse partition matches {'system': 'b200_sxm'}" in nothing.stdout


def test_kda_need_sends_the_kda_kernel_columns_and_is_priced_on_real_rows():
    """K3's KDA need is the estimator's `kda_kernel` query (kernel, phase, heads, batch, seq): priced from the
    h200 vllm kda rows (0.1.dev19262, reached from 0.24.0); a cell without that kernel's rows is a named miss."""
    from estimator.batch import estimate
    from estimator.context import Estimator
    from estimator.ops import registry
    from estimator.sources import TreeSource
    from ledger.matrix.build import Pricer, model_needs

    needs = [n for n in model_needs(find_spec("kimi-k3"), ("agg",))["agg"] if n.name == "kda_attention"]
    assert [(n.op, n.phase) for n in needs] == [("kda_kernel", "context"), ("kda_kernel", "generation")]
    ctx, gen = (dict(n.query) for n in needs)
    assert ctx == {"heads": 12, "head_dim": 128, "d_model": 7168, "batch": 1, "seq": 256,
                   "kernel": "causal_conv1d_fn_qkv3", "phase": "context"}
    assert gen["kernel"] == "causal_conv1d_update" and gen["batch"] == 64 and "seq" not in gen
    est = Estimator(TreeSource(SHARED_DATA))
    pricer = Pricer(lambda op, q, mode: estimate(est, op, q, mode=mode), frozenset(registry()), RULES.source_tiers)
    assert [pricer.need(n, ("h200_sxm", "vllm", "0.24.0")) for n in needs] == [("silicon", None)] * 2
    tier, err = pricer.need(needs[1], ("l40s", "sglang", "0.5.16"))  # l40s sglang has no 12-head conv update rows
    assert tier is None and err.startswith("kda_attention (generation, kda_perf): ") and "num_k_heads=12" in err
