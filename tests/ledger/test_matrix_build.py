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

FOLDERS = ["h200_sxm/gemm/vllm/0.24.0", "h200_sxm/moe/vllm/0.24.0", "h200_sxm/mla_bmm/vllm/0.24.0"]
RULES = load_rules()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("wh-matrix")
    assert not ingest([str(SHARED_DATA / f) for f in FOLDERS], Warehouse(root)).failed_batches
    result = CliRunner().invoke(app, ["matrix", "build", "deepseek-v3", "kimi-k3", "--warehouse", str(root), "--json"])
    assert result.exit_code == 0, result.stdout
    from ledger.matrix.store import read_snapshot

    return json.loads(result.stdout.strip().splitlines()[-1]), read_snapshot(Warehouse(root), "perfledger")[1]


def test_pass_when_every_need_is_priced_from_collected_data(built):
    summary, frame = built
    assert summary["label"] == "perfledger" and summary["rows"] == 4  # 2 models x 1 combination x 2 modes
    v3 = frame.filter(pl.col("HuggingFaceID") == "deepseek-ai/DeepSeek-V3")
    assert v3.select("System", "Backend", "Version", "Status", "Source").unique().rows() == [
        ("h200_sxm", "vllm", "0.24.0", "PASS", "silicon")]
    assert sorted(v3["Mode"]) == ["agg", "disagg"]


def test_fail_names_the_missing_lane(built):
    _, frame = built
    k3 = frame.filter(pl.col("HuggingFaceID") == "moonshotai/Kimi-K3").row(0, named=True)
    assert k3["Status"] == "FAIL" and k3["Source"] == ""
    assert "lane kda (kda_perf): no collected rows for h200_sxm/vllm at 0.24.0, 0.1.dev19262" in k3["ErrMsg"]
    assert "moe:" not in k3["ErrMsg"]  # K3's MoE shape is collected on h200 vLLM 0.24.0


def test_hw_rule_uses_the_system_spec():
    v3 = find_spec("deepseek-v3")
    assert hw_gap(v3, "a100_sxm", load_spec("a100_sxm").flops) == "a100_sxm has no FP8 tensor cores, required by deepseek-ai/DeepSeek-V3"
    assert hw_gap(v3, "h100_sxm", load_spec("h100_sxm").flops) is None


def test_pinned_lane_versions_serve_other_versions():
    from ledger.matrix.build import lane_versions

    k3 = find_spec("kimi-k3")
    assert lane_versions(k3, "kda", ("gb300", "vllm", "0.24.0")) == ["0.24.0", "0.1.dev19262"]
    assert lane_versions(k3, "mla_bmm.96fam", ("h200_sxm", "sglang", "0.5.16")) == ["0.5.16"]  # sglang only on b200
    assert lane_versions(k3, "mla_bmm.96fam", ("b200_sxm", "sglang", "0.5.16")) == ["0.5.16", "0.5.14"]


def test_helpers():
    assert weakest(["silicon", "xprofile", "xshape"], RULES.source_tiers) == "xprofile"
    need = find_spec("kimi-k3").matrix.ops[1]
    q = need_queries(need, "b200_sxm", "sglang", "0.5.16")
    assert q.height == 3 and set(q["quant"]) == {"bfloat16"} and q["m"].to_list() == [1, 64, 512]
    parts = pl.DataFrame({"system": ["h200_sxm", "h200_sxm", "a100_sxm"], "backend": ["vllm", "nccl", "vllm"],
                          "version": ["0.24.0", "2.23", "0.14.0"]})
    assert combinations(parts, find_spec("kimi-k3"), RULES) == [("h200_sxm", "vllm", "0.24.0")]


def test_disagreements_with_the_imported_matrix(built):
    from ledger.matrix.compare import model_disagreements
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
