"""Decode passes built once per deployment (static.decode_passes): every registered layer plan passes a decode
pass's seq through as a query value, so the op lists of all steps equal pass_ops at each step, the ops without it
shared between steps."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from perfledger.estimator.errors import EstimatorError
from perfledger.estimator.models.config import catalog, read_config
from perfledger.estimator.models.plans.registry import PLANS, LayerPlan, load_model
from perfledger.estimator.static import Deploy, decode_passes, pass_ops

SEQS = [1001, 1033, 4097]


def _wheel_models() -> list[Path]:
    wheel = pytest.importorskip("aiconfigurator_core")
    arches = catalog()["architectures"]
    out = []
    for path in sorted((Path(wheel.__file__).parent / "model_configs").glob("*_config.json")):
        if not path.name.endswith("_hf_quant_config.json"):
            arch = (json.loads(path.read_text()).get("architectures") or ["?"])[0]
            out += [path] if arch in arches else []
    return out


def _deploys(m) -> list[Deploy]:
    """Layouts that exercise the plans' branches: TP, MoE expert parallel with attention DP, pipeline + MTP."""
    backends = m.family.get("backends") or ("trtllm", "sglang", "vllm")
    out = []
    for backend in backends:
        base = Deploy("h200_sxm", backend, "0", gemm_quant="bfloat16", moe_quant="bfloat16", kv_quant="bfloat16",
                      fmha_quant="bfloat16")
        out += [replace(base, tp=2, moe_tp=2), replace(base, tp=1, attention_dp=4, moe_ep=4),
                replace(base, tp=4, moe_tp=4, pp=2, nextn=1)]
    return out


def _assert_passes_equal_pass_ops(m, d: Deploy, batch: int) -> None:
    passes = decode_passes(m, d, batch, SEQS)
    assert passes == [pass_ops(m, d, batch, False, batch, seq) for seq in SEQS]
    for i, first in enumerate(passes[0]):  # an op is shared by every step, or its query differs between steps
        assert all(p[i] is first for p in passes[1:]) or passes[0][i] != passes[-1][i], first[0]


def test_every_registered_plan_builds_decode_passes_equal_to_pass_ops():
    checked: dict[str, int] = {}
    for path in _wheel_models():
        m = load_model(read_config(path, path.name))
        for d in _deploys(m):
            try:
                pass_ops(m, d, 8, False, 8, SEQS[0])
            except EstimatorError:  # a layout the plan refuses (widths, backends): nothing to build
                continue
            _assert_passes_equal_pass_ops(m, d, 8)
            checked[m.family["kind"]] = checked.get(m.family["kind"], 0) + 1
    assert set(checked) == set(PLANS), f"plans never built: {sorted(set(PLANS) - set(checked))}"


def test_a_plan_computing_with_the_decode_seq_is_refused_by_name(monkeypatch):
    """A plan that would price a decode step from arithmetic on seq (here min(seq, 2048)) cannot be built once."""
    m = load_model("Qwen/Qwen3-32B")
    dense = PLANS["dense"].ops

    def capped(m, d, tokens, context, batch, seq):
        ops = dense(m, d, tokens, context, batch, seq)
        return [(n, op, {**q, "seq": min(seq, 2048)} if "seq" in q else q, s) for n, op, q, s in ops]

    monkeypatch.setitem(PLANS, "dense", LayerPlan(capped))
    with pytest.raises(TypeError, match="dense layer plan computes with a decode pass's seq"):
        decode_passes(m, Deploy("h200_sxm", "vllm", "0", tp=2), 8, SEQS)


def test_nested_fallback_and_overlap_groups_are_bound_and_shared():
    """DeepSeek's MLA module carries its granular ops as a fallback; their seq is bound too."""
    m = load_model("deepseek-ai/DeepSeek-V3")
    d = Deploy("h200_sxm", "trtllm", "0", tp=8, moe_tp=1, moe_ep=8, gemm_quant="fp8_block", moe_quant="fp8_block",
               kv_quant="bfloat16", fmha_quant="bfloat16")
    _assert_passes_equal_pass_ops(m, d, 16)
    nested = [op for op in decode_passes(m, d, 16, SEQS)[1] if op[1] in ("fallback", "overlap")]
    assert nested, "DeepSeek-V3's decode pass should hold a fallback op"
