"""`matrix build` with the real estimator over a small real warehouse (h200 vLLM 0.24.0 from ../shared, with
the MLA module tables, and the K3 preview build's KDA rows, vLLM 0.1.dev19262, which has no GEMM rows)."""

import json
from itertools import product

import polars as pl
import pytest
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.estimator.data.system_specs import load_spec
from perfledger.ledger.matrix.build import (
    Pricer,
    combinations,
    hw_gap,
    model_needs,
    need_queries,
    weakest,
)
from perfledger.ledger.matrix.needs import Choice, Need
from perfledger.ledger.matrix.rules import load_rules
from perfledger.ledger.specs import find_spec
from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.store import Warehouse
from tests.ledger.curated import SHARED_DATA

pytestmark = pytest.mark.xdist_group("ledger-test_matrix_build")

FOLDERS = ["h200_sxm/gemm/vllm/0.24.0", "h200_sxm/moe/vllm/0.24.0", "h200_sxm/mla_bmm/vllm/0.24.0",
           "h200_sxm/attention/vllm/0.24.0", "h200_sxm/comm/vllm/0.24.0", "h200_sxm/comm/nccl/2.26.2",
           "h200_sxm/mla/vllm/0.24.0", "h200_sxm/kda/vllm/0.1.dev19262"]
CELL = ("h200_sxm", "vllm", "0.24.0")
BARE = ("h200_sxm", "vllm", "0.1.dev19262")  # a partition with KDA rows only
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
    from perfledger.ledger.matrix.store import read_snapshot

    return json.loads(result.stdout.strip().splitlines()[-1]), read_snapshot(Warehouse(root), "perfledger")[1]


@pytest.fixture(scope="module")
def heuristic(root):
    """The one-replica per-op heuristic's rows (`build_rows`, the diagnostic) over the same cells as `built`."""
    from perfledger.estimator.batch import estimate
    from perfledger.estimator.data.sources import WarehouseSource
    from perfledger.estimator.session import Estimator
    from perfledger.ledger.matrix.build import build_rows
    from perfledger.ledger.source import build_cells

    est = Estimator(WarehouseSource(root))
    frames = []
    for model in ("deepseek-v3", "kimi-k3", "qwen3-235b-a22b"):
        spec = find_spec(model)
        lanes = {(c["lane"], c["system"], c["backend"], c["version"]): c["rows"]
                 for c in build_cells(Warehouse(root), spec).iter_rows(named=True)}
        frames.append(build_rows(spec, [CELL, BARE], lambda op, q, mode: estimate(est, op, q, mode=mode),
                                 {"h200_sxm": load_spec("h200_sxm").flops}, lanes))
    return pl.concat(frames)


def test_pass_when_every_need_is_priced_from_collected_data(built):
    summary, frame = built
    assert summary["label"] == "perfledger" and summary["rows"] == 12  # 3 models x 2 combinations x 2 modes
    qwen = frame.filter((pl.col("HuggingFaceID") == "Qwen/Qwen3-235B-A22B") & (pl.col("Version") == "0.24.0"))
    assert qwen.select("System", "Backend", "Version", "Status", "Source").unique().rows() == [
        ("h200_sxm", "vllm", "0.24.0", "PASS", "silicon")]
    assert sorted(qwen["Mode"]) == ["agg", "disagg"]


def test_hybrid_pass_carries_the_weakest_tier(root):
    import dataclasses

    from perfledger.estimator.batch import estimate
    from perfledger.estimator.data.sources import WarehouseSource
    from perfledger.estimator.session import Estimator
    from perfledger.ledger.matrix.build import build_rows

    qwen = find_spec("qwen3-235b-a22b")  # no w4a16_mxfp4 MoE of this shape on h200: the MoE needs an xshape transfer
    mxfp4 = dataclasses.replace(qwen, matrix=dataclasses.replace(qwen.matrix, quant={**qwen.matrix.quant, "moe": "w4a16_mxfp4"}))
    est = Estimator(WarehouseSource(root))
    rows = build_rows(mxfp4, [("h200_sxm", "vllm", "0.24.0")], lambda op, q, mode: estimate(est, op, q, mode=mode),
                      {"h200_sxm": load_spec("h200_sxm").flops}, {})
    assert rows.select("Mode", "Status", "ErrMsg", "Source").rows() == [("agg", "HYBRID_PASS", "", "xshape"),
                                                                         ("disagg", "HYBRID_PASS", "", "xshape")]


def pricer_over(source) -> Pricer:
    from perfledger.estimator.batch import estimate
    from perfledger.estimator.ops.registry import registry
    from perfledger.estimator.session import Estimator

    est = Estimator(source)
    return Pricer(lambda op, q, mode: estimate(est, op, q, mode=mode), frozenset(registry()), RULES.source_tiers)


def choices_of(model: str, mode: str = "agg") -> dict:
    return {(n.name, n.phase): n for n in model_needs(find_spec(model), (mode,))[mode] if isinstance(n, Choice)}


def test_an_op_the_estimator_lacks_is_a_fail_that_says_so(root):
    from perfledger.estimator.data.sources import WarehouseSource
    from perfledger.ledger.matrix.needs import Option

    pricer = pricer_over(WarehouseSource(root))
    lacking = Need("mla_rope", "mla_rope", "mla_rope_perf", "context", (("heads", 12),))
    assert pricer.need(lacking, CELL) == (None, "mla_rope (context, mla_rope_perf): the estimator has no 'mla_rope' op model")
    module = choices_of("kimi-k3")[("mla_context_attention", "context")].options[0]
    tier, err = pricer.any(Choice("mla_context_attention", "context", (Option((lacking,)), module)), CELL)
    assert tier == "silicon" and err is None  # an option with a missing op model is skipped, never a pass by omission
    tier, err = pricer.any(Choice("mla_context_attention", "context", (Option((lacking,)),)), CELL)
    assert tier is None and "[1] mla_rope (context, mla_rope_perf): the estimator has no 'mla_rope' op model" in err


def test_fail_names_the_first_missing_need_then_the_rest(heuristic):
    frame = heuristic
    k3 = frame.filter((pl.col("HuggingFaceID") == "moonshotai/Kimi-K3") & (pl.col("Version") == BARE[2])).row(0, named=True)
    assert k3["Status"] == "FAIL" and k3["Source"] == ""
    assert k3["ErrMsg"].startswith("qkv_a_proj (context, gemm_perf): no gemm_perf rows for h200_sxm/vllm/0.1.dev19262")
    assert k3["ErrMsg"].count("no gemm_perf rows") == 1  # the first reason in full, the others by name
    assert "mla_context_attention/context" in k3["ErrMsg"] and "moe_experts/context" in k3["ErrMsg"]
    assert "kda_scan" not in k3["ErrMsg"] and "lane kda" not in k3["ErrMsg"]  # the KDA rows are at this version


def test_k3_and_v3_on_a_vllm_cell_with_module_tables_pass_through_the_module(heuristic, root):
    """MLA priced as vLLM's measured module (first any_of option), KDA by vLLM's own scan/decode kernels."""
    from perfledger.estimator.data.sources import WarehouseSource
    from perfledger.ledger.matrix.choices import resolve_choice

    frame = heuristic
    ok = frame.filter(pl.col("Version") == CELL[2]).select("HuggingFaceID", "Mode", "Status", "Source").rows()
    assert sorted(ok) == sorted([(m, mode, "PASS", "silicon") for m in ("deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-235B-A22B")
                                 for mode in ("agg", "disagg")] + [("moonshotai/Kimi-K3", mode, "FAIL", "")
                                                                   for mode in ("agg", "disagg")])
    # every K3 op is priced (below), but 181 GiB of weights per GPU at TP8/EP8 exceed the h200's 141 GiB
    k3 = frame.filter((pl.col("Version") == CELL[2]) & (pl.col("HuggingFaceID") == "moonshotai/Kimi-K3"))
    assert set(k3["ErrMsg"]) == {("memory (tp8/moe_tp1/moe_ep8, batch 1, isl 256 + osl 256): moonshotai/Kimi-K3 needs "
                                  "185.36 GiB per GPU (weights 181.13, kv 0.27, activations 0.07, runtime 3.88), h200_sxm "
                                  "has 141.00 GiB: model does not fit in GPU memory")}
    pricer = pricer_over(WarehouseSource(root))
    wins = {}
    for model, mode in product(("kimi-k3", "deepseek-v3"), ("agg", "disagg")):
        for key, choice in choices_of(model, mode).items():
            tier, _, option = resolve_choice(choice, "vllm", lambda need: pricer.need(need, CELL),
                                             lambda t: weakest(t, RULES.source_tiers))
            wins[(model, mode, *key)] = (tier, option.label)
    assert wins[("kimi-k3", "disagg", "mla_context_attention", "context")] == ("silicon", "mla_context_module")
    assert wins[("deepseek-v3", "agg", "mla_generation_attention", "generation")] == ("silicon", "mla_generation_module")
    assert wins[("kimi-k3", "agg", "kda_scan", "context")] == ("silicon", "flashkda_fwd")
    assert wins[("kimi-k3", "disagg", "kda_decode", "generation")] == ("silicon", "fused_kda_decode")


def test_a_cell_without_mla_data_fails_naming_every_alternative():
    """b200 vLLM 0.24.0 in ../shared: no module slice, no GEMM rows for the pieces; the sglang/trtllm kernels
    are not vLLM's. The reason names each option in order, with its table."""
    from perfledger.estimator.data.sources import TreeSource

    choice = choices_of("kimi-k3")[("mla_context_attention", "context")]
    tier, err = pricer_over(TreeSource(SHARED_DATA)).any(choice, ("b200_sxm", "vllm", "0.24.0"))
    assert tier is None and err.startswith("mla_context_attention (context): no alternative priced: [1] ")
    first, second, third = err.split(": no alternative priced: ", 1)[1].split("; [")  # the estimator's own reasons
    assert first.startswith("[1] mla_context_module (context, mla_context_module_perf): no mla_context_module_perf")
    assert second.startswith("2] q_b_proj (context, gemm_perf): no gemm_perf rows for b200_sxm/vllm/0.24.0")
    assert third == "3] q_b_proj + kv_b_proj + context_mla + o_proj: not used by vllm (only sglang, trtllm)"
    from perfledger.ledger.matrix.explain import reason_of

    assert reason_of("FAIL", err, "") == "no option of mla_context_attention priced for that system/backend/version"


def test_a_priced_row_on_a_too_small_deployment_fails_naming_needed_and_available_memory(root):
    """Qwen3-235B bf16 prices on h200 vLLM 0.24.0 and fits TP8/EP8 (59 of 141 GiB); squeezed onto one GPU it
    needs 3.5x the GPU and FAILs with the memory reason instead of PASS (rules.yaml memory_fit)."""
    import dataclasses

    from perfledger.estimator.batch import estimate
    from perfledger.estimator.data.sources import WarehouseSource
    from perfledger.estimator.session import Estimator
    from perfledger.ledger.matrix.build import build_rows, memory_gap
    from perfledger.ledger.matrix.explain import reason_of

    qwen, est = find_spec("qwen3-235b-a22b"), Estimator(WarehouseSource(root))
    def run(rules):
        return build_rows(qwen, [CELL], lambda op, q, mode: estimate(est, op, q, mode=mode),
                                       {"h200_sxm": load_spec("h200_sxm").flops}, {}, rules)
    assert memory_gap(qwen, *CELL, RULES) is None
    assert run(RULES)["Status"].to_list() == ["PASS", "PASS"]
    one_gpu = dataclasses.replace(RULES, memory_fit={**RULES.memory_fit, "tp": 1, "moe_ep": 1})
    rows = run(one_gpu)
    assert rows.select("Status", "Source").rows() == [("FAIL", ""), ("FAIL", "")]
    err = rows["ErrMsg"][0]
    assert err == ("memory (tp1/moe_tp1/moe_ep1, batch 1, isl 256 + osl 256): Qwen/Qwen3-235B-A22B needs 440.40 GiB "
                   "per GPU (weights 436.74, kv 0.09, activations 0.07, runtime 3.50), h200_sxm has 141.00 GiB: "
                   "model does not fit in GPU memory")
    assert reason_of("FAIL", err, "") == "model does not fit in GPU memory at tp1/moe_tp1/moe_ep1"
    unknown = dataclasses.replace(qwen, model="Org/No-Such-Model")
    assert memory_gap(unknown, *CELL, RULES).startswith("memory (tp8/moe_tp1/moe_ep8): cannot size Org/No-Such-Model: ")


def test_a_data_gap_names_the_table_and_slice():
    from perfledger.estimator.errors import NoDataError
    from perfledger.ledger.matrix.build import Pricer
    from perfledger.ledger.matrix.needs import Need

    def estimate(op, q, mode):
        raise NoDataError(f"no moe_perf slice for quant={q['quant'][0]}")

    need = Need("moe_experts", "moe", "moe_perf", "context", (("quant", "nvfp4"), ("tokens", 256)))
    tier, err = Pricer(estimate, frozenset({"moe"}), RULES.source_tiers).need(need, ("h200_sxm", "vllm", "0.24.0"))
    assert tier is None and err == "moe_experts (context, moe_perf): no moe_perf slice for quant=nvfp4"


def test_hw_rule_uses_the_system_spec():
    v3 = find_spec("deepseek-v3")
    assert hw_gap(v3, "a100_sxm", load_spec("a100_sxm").flops) == (
        "a100_sxm has no FP8 tensor cores, required by deepseek-ai/DeepSeek-V3")
    assert hw_gap(v3, "h100_sxm", load_spec("h100_sxm").flops) is None
    assert hw_gap(v3, "b60", {}) is None  # listed in rules.yaml as emulating fp8 in software
    k3 = find_spec("kimi-k3")  # rules.yaml unsupported_quants: SM89 kernels cannot run MXFP4 MoE
    assert hw_gap(k3, "l40s", load_spec("l40s").flops) == (
        "l40s kernels do not support moe quant w4a16_mxfp4, required by moonshotai/Kimi-K3")
    assert hw_gap(k3, "h100_sxm", load_spec("h100_sxm").flops) is None


def test_hw_rule_takes_dtypes_from_quant_labels_fp4_named_first():
    import dataclasses

    from perfledger.ledger.matrix.build import required_dtypes

    v3 = find_spec("deepseek-v3")
    fp4_matrix = dataclasses.replace(v3.matrix, requires=(), quant={"gemm": "fp8_block", "moe": "nvfp4"})
    nvfp4 = dataclasses.replace(v3, matrix=fp4_matrix)
    assert required_dtypes(nvfp4) == ["fp4", "fp8"]
    assert hw_gap(nvfp4, "h100_sxm", load_spec("h100_sxm").flops) == (
        "h100_sxm has no FP4 tensor cores, required by deepseek-ai/DeepSeek-V3")
    assert required_dtypes(find_spec("kimi-k3")) == []  # w4a16_mxfp4 runs on bf16 tensor cores


def test_pinned_lane_versions_serve_other_versions():
    from perfledger.ledger.matrix.build import lane_versions

    k3 = find_spec("kimi-k3")
    assert lane_versions(k3, "kda", ("gb300", "vllm", "0.24.0")) == ["0.24.0", "0.1.dev19262"]
    assert lane_versions(k3, "mla_bmm.96fam", ("h200_sxm", "sglang", "0.5.16")) == ["0.5.16"]  # sglang only on b200
    assert lane_versions(k3, "mla_bmm.96fam", ("b200_sxm", "sglang", "0.5.16")) == ["0.5.16", "0.5.14"]


def test_helpers():
    from perfledger.ledger.specs import OpNeed

    assert weakest(["silicon", "xprofile", "xshape"], RULES.source_tiers) == "xprofile"
    need = OpNeed("gemm", {"quant": "bfloat16"}, {"m": (1, 64, 512), "n": (7168,), "k": (12288,)})
    q = need_queries(need, "b200_sxm", "sglang", "0.5.16")
    assert q.height == 3 and set(q["quant"]) == {"bfloat16"} and q["m"].to_list() == [1, 64, 512]
    parts = pl.DataFrame({"system": ["h200_sxm", "h200_sxm", "a100_sxm"], "backend": ["vllm", "nccl", "vllm"],
                          "version": ["0.24.0", "2.23", "0.14.0"]})
    assert combinations(parts, find_spec("kimi-k3"), RULES) == [("h200_sxm", "vllm", "0.24.0")]


def test_disagreements_with_the_imported_matrix(built):
    from perfledger.ledger.matrix.explain import model_disagreements, reason_of
    from perfledger.ledger.matrix.reader import read_matrix
    from tests.ledger.curated import MATRIX_STATES

    _, ours = built
    head = read_matrix(MATRIX_STATES / "head-095f58a")
    k3 = model_disagreements(ours, head, "moonshotai/Kimi-K3")
    # 0.1.dev19262 agg and disagg: both FAIL (the reference crashed; ours: no allreduce rows / cross-node EP).
    # 0.24.0 agg and disagg: head's run found nothing that fits 128 GPUs; our search (0.12.0's, at parity on K3
    # 16 x h200, with the cached prefix priced on every op) does.
    assert (k3["agree"], k3["only_ours"], k3["only_imported"]) == (2, 0, 232)
    assert [(d["Version"], d["Mode"], d["imported"], d["ours"], d["why"]) for d in k3["disagree"]] == [
        ("0.24.0", mode, "FAIL", "PASS", "imported: model does not fit in GPU memory") for mode in ("agg", "disagg")]
    only_imported = {"transition": "only imported", "keys": 232,
                     "reason": "key not in our warehouse (no collected partition for that backend/version)"}
    assert k3["by_reason"] == [only_imported, {"transition": "FAIL → PASS", "keys": 2,
                                               "reason": "imported: model does not fit in GPU memory"}]
    theirs = head.filter((pl.col("HuggingFaceID") == "moonshotai/Kimi-K3") & (pl.col("System") == "h200_sxm")
                         & (pl.col("Backend") == "vllm") & (pl.col("Version") == "0.24.0")).row(0, named=True)
    assert reason_of(theirs["Status"], theirs["ErrMsg"], "") == "model does not fit in GPU memory"
    failed = ours.with_columns(Status=pl.lit("FAIL"), Source=pl.lit(""),
                               ErrMsg=pl.lit("lane kda (kda_perf): no collected rows for h200_sxm/vllm at 0.24.0"))
    same = model_disagreements(failed, head, "moonshotai/Kimi-K3")
    assert (same["agree"], same["disagree"], same["by_reason"]) == (4, [], [only_imported])


def test_explain_cli_counts_disagreements_by_reason(root, built):
    from tests.ledger.curated import MATRIX_STATES

    head = str(MATRIX_STATES / "head-095f58a")
    result = CliRunner().invoke(app, ["matrix", "explain", "kimi-k3", head, "--warehouse", str(root), "--json"])
    assert result.exit_code == 0, result.stdout
    payload = json.loads(result.stdout)
    summary = (payload["model"], payload["ours"], payload["imported"], payload["agree"])
    assert summary == ("moonshotai/Kimi-K3", "perfledger", head, 2)
    assert payload["by_reason"] == [{"transition": "only imported", "keys": 232,
                                     "reason": "key not in our warehouse (no collected partition for that backend/version)"},
                                    {"transition": "FAIL → PASS", "keys": 2,
                                     "reason": "imported: model does not fit in GPU memory"}]
    text = CliRunner().invoke(app, ["matrix", "explain", "kimi-k3", head, "--warehouse", str(root)])
    header, _, row = text.stdout.splitlines()[1:4]  # a table: keys, transition, reason
    assert header.split() == ["keys", "transition", "reason"]
    assert row.split(None, 3)[:3] == ["232", "only", "imported"]
    assert row.rstrip().endswith("key not in our warehouse (no collected partition for that backend/version)")
    missing = CliRunner().invoke(app, ["matrix", "explain", "kimi-k3", "no-such-label", "--warehouse", str(root), "--json"])
    assert missing.exit_code == 2 and "no support-matrix snapshot labelled 'no-such-label'" in missing.stdout


def test_reasons_bucket_both_sides():
    from perfledger.ledger.matrix.explain import reason_of

    assert reason_of("FAIL", "mla_context_attention (context, mla_context_module_perf): the estimator has no "
                     "'mla_context' op model [+1 more unpriced: x]", "") == "estimator has no mla_context op model"
    assert reason_of("FAIL", "moe_experts (context, moe_perf): no moe_perf slice for quant=nvfp4", "") == \
        "no moe_perf slice for the query"
    assert reason_of("FAIL", "lane kda (kda_perf): no collected rows for l40s/vllm at 0.24.0", "") == \
        "lane kda has no collected rows"
    assert reason_of("FAIL", "Traceback ...\\nValueError: Unsupported moe quant mode 'nvfp4' for system=h100_sxm", "") == \
        "unsupported moe quant nvfp4"
    assert reason_of("FAIL", "qkv_proj (context, gemm_perf): no gemm_perf rows for b200_sxm/sglang/0.5.10 in warehouse w",
                     "") == "no gemm_perf rows for that system/backend/version"
    assert reason_of("HW_INCOMPATIBLE", "l40s kernels do not support moe quant w4a16_mxfp4, required by m", "") == \
        "hardware: kernels lack moe quant w4a16_mxfp4"
    assert reason_of("FAIL", "kda_scan (context): no alternative priced: [1] flashkda_fwd: not used by trtllm (only vllm); "
                     "[2] chunk_kda: not used by trtllm (only sglang) [+1 more unpriced: lane kda]", "") == \
        "needs.yaml has no kda_scan option for trtllm"
    assert reason_of("FAIL", "kda_scan (context): no alternative priced: [1] flashkda_fwd: not used by sglang (only vllm); "
                     "[2] chunk_kda (context, kda_perf): kda_perf l40s/sglang/0.5.16: no rows for kernel_source=chunk_kda",
                     "") == "no option of kda_scan priced for that system/backend/version"
    assert reason_of("HYBRID_PASS", "", "xshape") == "HYBRID_PASS (xshape)"
    assert reason_of("FAIL", "Traceback\\nKeyError: 'x'", "") == "FAIL: KeyError: 'x'"


def test_the_command_column_replays_one_row(root, built):
    """Command is the `perfledger plan` question the row's search asked (the reference's runs `cli default`); replayed
    here on K3's disagg row at the KDA-only version, whose refusal answers at once (a PASS row's replay is a full search:
    benchmarks, not tests)."""
    import shlex

    _, frame = built
    for row in frame.filter(pl.col("Version") == CELL[2]).iter_rows(named=True):
        argv = shlex.split(row["Command"])
        assert argv[:2] == ["perfledger", "plan"] and argv[argv.index("--mode") + 1] == row["Mode"]
        assert argv[argv.index("--total-gpus") + 1] == str(int(RULES.search["total_gpus"]))
        assert argv[argv.index("--version") + 1] == CELL[2] and argv[argv.index("--top-n") + 1] == "1"
    row = frame.filter((pl.col("HuggingFaceID") == "moonshotai/Kimi-K3") & (pl.col("Version") == BARE[2])
                       & (pl.col("Mode") == "disagg")).row(0, named=True)
    result = CliRunner().invoke(app, [*shlex.split(row["Command"])[1:], "--warehouse", str(root), "--json"])
    replay = json.loads(result.stdout)
    assert row["Status"] == "FAIL" and result.exit_code == 1 and replay["reasons"]["disagg"] in row["ErrMsg"]  # the same reason


def test_a_filtered_build_never_replaces_the_full_snapshot(root):
    runner = CliRunner()
    refused = runner.invoke(app, ["matrix", "build", "qwen3-235b-a22b", "--system", "h200_sxm", "--warehouse", str(root),
                                  "--json"])
    assert refused.exit_code == 2 and "replace the full 'perfledger' snapshot" in refused.stdout
    nothing = runner.invoke(app, ["matrix", "build", "qwen3-235b-a22b", "--system", "b200_sxm", "--no-store",
                                  "--warehouse", str(root), "--json"])
    assert nothing.exit_code == 2 and "no warehouse partition matches {'system': 'b200_sxm'}" in nothing.stdout


def test_kda_needs_pick_each_backends_kernels_from_real_rows():
    """K3's KDA: the short conv for every backend, then the scan and decode kernels the cell's backend runs
    (`kda_kernel` queries: kernel, phase, per-shard heads, batch, seq), priced from ../shared's kda rows."""
    from perfledger.estimator.data.sources import TreeSource
    from perfledger.ledger.matrix.choices import resolve_choice

    conv = [n for n in model_needs(find_spec("kimi-k3"), ("agg",))["agg"] if isinstance(n, Need) and n.op == "kda_kernel"]
    assert [(n.name, n.phase) for n in conv] == [("causal_conv1d_fn_qkv3", "context")]
    assert dict(conv[0].query) == {"heads": 12, "head_dim": 128, "d_model": 7168, "batch": 1, "seq": 256,
                                   "kernel": "causal_conv1d_fn_qkv3", "phase": "context"}
    scan = choices_of("kimi-k3")[("kda_scan", "context")]
    assert [(o.label, o.backends) for o in scan.options] == [
        ("flashkda_fwd", ("vllm",)), ("chunk_kda", ("sglang", "trtllm")), ("chunk_kda_with_fused_gate", ("vllm",))]
    decode = {m: choices_of("kimi-k3", m)[("kda_decode", "generation")] for m in ("agg", "disagg")}
    fused = dict(decode["agg"].options[0].needs[0].query)
    assert fused["kernel"] == "fused_kda_decode" and fused["batch"] == 64 and fused["heads"] == 12 and "seq" not in fused
    assert dict(decode["disagg"].options[0].needs[0].query)["heads"] == 96  # disagg decode: attention DP, TP 1
    pricer = pricer_over(TreeSource(SHARED_DATA))

    def win(choice, cell):
        tier, err, option = resolve_choice(choice, cell[1], lambda n: pricer.need(n, cell),
                                           lambda t: weakest(t, RULES.source_tiers))
        return (tier, option.label) if option else (tier, err)

    assert win(scan, ("h200_sxm", "vllm", "0.24.0")) == ("silicon", "flashkda_fwd")  # 0.1.dev19262 rows, reached from 0.24.0
    assert win(decode["agg"], ("h200_sxm", "vllm", "0.24.0")) == ("silicon", "fused_kda_decode")
    assert win(scan, ("h200_sxm", "sglang", "0.5.16")) == ("silicon", "chunk_kda")
    assert win(decode["agg"], ("h200_sxm", "sglang", "0.5.16")) == ("silicon", "kda_fused_decode")  # sglang: 12 heads only
    assert win(decode["disagg"], ("h200_sxm", "sglang", "0.5.16")) == (
        "silicon", "causal_conv1d_update + fused_recurrent_kda_packed_decode")  # 96 heads: the two-kernel path
    assert win(scan, ("l40s", "vllm", "0.1.dev19262")) == ("silicon", "chunk_kda_with_fused_gate")  # no FlashKDA on SM89
    # trtllm (no kda table, no lender): 0.12.0's chunk_kda and Triton decode pair, on the KDA roofline
    trtllm = ("h200_sxm", "trtllm", "1.3.0rc20")
    assert (win(scan, trtllm), win(decode["agg"], trtllm)) == (
        ("sol", "chunk_kda"), ("sol", "causal_conv1d_update + fused_recurrent_kda_packed_decode"))


def test_search_decided_rows_agree_with_head_except_where_our_search_refuses(built):
    """On the keys head-095f58a also holds, every row the search decided has head's status; the rest are search
    refusals (architectures whose agg step / disagg layouts the search does not price yet), named per mode."""
    from perfledger.ledger.matrix.reader import read_matrix
    from tests.ledger.curated import MATRIX_STATES

    _, ours = built
    head = read_matrix(MATRIX_STATES / "head-095f58a").select(*RULES.key, pl.col("Status").alias("head"))
    both = ours.join(head, on=list(RULES.key), how="inner")
    assert both.height >= 8
    refused = pl.col("ErrMsg").str.contains(r"^(agg|disagg) search: search refused")
    decided = both.filter(~refused)
    differ = decided.filter(pl.col("Status") != pl.col("head"))
    # the decided rows apart: K3 agg and disagg on h200 vLLM 0.24.0, where head's run found no fit and the search finds one
    assert decided.height >= 2 and differ.select("HuggingFaceID", "Version", "Mode", "Status", "head").rows() == [
        ("moonshotai/Kimi-K3", "0.24.0", mode, "PASS", "FAIL") for mode in ("agg", "disagg")], differ
    assert "PASS" in set(decided["Status"])  # Qwen3-235B on h200 vLLM 0.24.0: found in SILICON, as head says
    for row in both.filter(refused).iter_rows(named=True):
        assert row["ErrMsg"].startswith(f"{row['Mode']} search: search refused: ") and row["Status"] == "FAIL"
