"""The matrix's memory fit (rules.yaml `memory_fit`, estimator/models/memory.py) against the imported head-095f58a matrix:
over every row of Kimi-K3, DeepSeek-V3 and Qwen3-235B, the reference's out-of-memory rows (InsufficientMemoryError,
KVCacheCapacityError) do not fit our representative replica, and none of its PASS / HYBRID_PASS rows fails it."""

import polars as pl
import pytest

from perfledger.ledger.matrix.build import memory_gap
from perfledger.ledger.matrix.explain import reason_of
from perfledger.ledger.matrix.reader import read_matrix
from perfledger.ledger.matrix.rules import load_rules
from perfledger.ledger.specs import find_spec
from tests.ledger.curated import MATRIX_STATES

RULES = load_rules()
OUT_OF_MEMORY = {"model does not fit in GPU memory", "KV cache does not fit"}


@pytest.fixture(scope="module")
def head() -> pl.DataFrame:
    return read_matrix(MATRIX_STATES / "head-095f58a")


@pytest.mark.parametrize("name,oom_rows", [("kimi-k3", 28), ("deepseek-v3", 22), ("qwen3-235b-a22b", 12)])
def test_memory_verdicts_agree_with_the_reference_on_every_row(head, name, oom_rows):
    spec = find_spec(name)
    rows = head.filter(pl.col("HuggingFaceID") == spec.model)
    gaps = {cell: memory_gap(spec, *cell, RULES) for cell in rows.select("System", "Backend", "Version").unique().rows()}
    passes = oom = 0
    for r in rows.iter_rows(named=True):
        gap = gaps[(r["System"], r["Backend"], r["Version"])]
        if r["Status"] in RULES.pass_statuses:
            passes += 1
            assert gap is None, (r["System"], r["Backend"], r["Version"], r["Mode"], gap)
        elif reason_of(r["Status"], r["ErrMsg"], "") in OUT_OF_MEMORY:
            oom += 1
            assert gap is not None and gap.endswith(("model does not fit in GPU memory", "KV cache does not fit")), r
    assert oom == oom_rows and passes > 0


def test_kv_budget_gap_names_the_budget(head):
    """DeepSeek-V3 on 8 x rtx_pro_6000 (96 GiB): 88.6 GiB fit, but vLLM 0.24.0's 0.92 x (1 - 0.02) of the GPU
    leaves no KV budget; the reference raises KVCacheCapacityError (agg) / InsufficientMemoryError (disagg)."""
    gap = memory_gap(find_spec("deepseek-v3"), "rtx_pro_6000_server", "vllm", "0.24.0", RULES)
    assert gap.startswith("memory (tp8/moe_tp1/moe_ep8, batch 1, isl 256 + osl 256): deepseek-ai/DeepSeek-V3 needs "
                          "88.59 GiB per GPU")
    assert gap.endswith("rtx_pro_6000_server has 95.59 GiB; vllm 0.24.0 leaves a KV budget of -2.37 GiB: KV cache does not fit")
    assert reason_of("FAIL", gap, "") == "KV cache does not fit at tp8/moe_tp1/moe_ep8"
    theirs = head.filter((pl.col("HuggingFaceID") == "deepseek-ai/DeepSeek-V3") & (pl.col("System") == "rtx_pro_6000_server")
                         & (pl.col("Backend") == "vllm") & (pl.col("Version") == "0.24.0"))
    assert sorted(reason_of(s, e, "") for s, e in theirs.select("Status", "ErrMsg").rows()) == [
        "KV cache does not fit", "model does not fit in GPU memory"]
