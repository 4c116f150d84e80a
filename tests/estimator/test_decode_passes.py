"""Decode passes built once per deployment (static.decode_passes): every registered layer plan passes a decode
pass's seq through as a query value, so the op lists of all steps equal pass_ops at each step, the ops without it
shared between steps."""

from __future__ import annotations

from dataclasses import replace

import pytest

from perfledger.estimator.errors import EstimatorError
from perfledger.estimator.models.plans.registry import PLANS, LayerPlan, load_model
from perfledger.estimator.static import Deploy, decode_passes, pass_ops

SEQS = [1001, 1033, 4097]


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


def test_every_registered_plan_builds_decode_passes_equal_to_pass_ops(sweep):
    """Every wheel model config models.yaml prices (the static sweep's list), each registered plan at least once."""
    checked: dict[str, int] = {}
    for name, *_ in sweep.models():
        m = load_model(name)
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


# (model, system, backend, version, deployment): dense with pipeline + MTP, MoE under attention DP, banded attention
# (two `attention` ops), DeepSeek's MLA module with fallback and overlap, K3's KDA + MLA, Nemotron-H's Mamba state ops
PRICED = [("Qwen/Qwen3-32B", "h200_sxm", "vllm", "0.24.0", dict(tp=2, pp=2, nextn=1)),
          ("Qwen/Qwen3-30B-A3B", "h200_sxm", "vllm", "0.24.0", dict(tp=2, attention_dp=2, moe_ep=4)),
          ("openai/gpt-oss-120b", "h200_sxm", "trtllm", "1.3.0rc20", dict(tp=4, moe_ep=4)),
          ("deepseek-ai/DeepSeek-V3", "h200_sxm", "vllm", "0.24.0", dict(tp=8, moe_ep=8, nextn=1)),
          ("moonshotai/Kimi-K3", "h200_sxm", "vllm", "0.24.0", dict(tp=8, moe_ep=8)),
          ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "h200_sxm", "vllm", "0.24.0", dict(tp=1))]


def _priced_passes(model, system, backend, version, kw):
    from perfledger.estimator.models.config import resolve_model
    from perfledger.estimator.quant.checkpoint import resolve as resolve_quants

    m = load_model(model)
    quants = resolve_quants(resolve_model(model), backend, {"gemm": None, "moe": None, "kv": None, "fmha": None})
    d = replace(Deploy(system, backend, version, **kw), **{f"{q}_quant": v["quant"] for q, v in quants.items()})
    return [decode_passes(m, d, b, list(range(1001, 2000, 32))) for b in (1, 8, 64)]


@pytest.mark.aic
@pytest.mark.parametrize("model,system,backend,version,kw", PRICED)
def test_price_steps_sums_equal_the_whole_lists_bit_for_bit(wheel_est, model, system, backend, version, kw):
    """price_steps prices a point's later steps in their own ops only; every step's sum and the points' source
    tiers equal those of the whole lists through price_many. A point whose own ops share a name with a shared op
    (the second case: the embedding renamed `attention`) is priced whole, and equal too."""
    from perfledger.estimator.plan.evaluate import price_many, price_steps

    passes = _priced_passes(model, system, backend, version, kw)
    shared_once: dict[int, tuple] = {}  # the renamed embedding stays one object across the steps, as shared ops are
    renamed = [[[shared_once.setdefault(id(op), ("attention", *op[1:])) if op[0] == "embedding" else op for op in step]
                for step in passes[1]]]
    for points in (passes, renamed):
        spec, whole_tiers, tiers = wheel_est.spec(system), [set() for _ in points], [set() for _ in points]
        got = price_steps(wheel_est, points, spec, tiers=tiers)
        flat = [step for steps in points for step in steps]
        flat_tiers = [set() for _ in flat]
        priced = iter(price_many(wheel_est, flat, spec, tiers=flat_tiers))
        want = [[sum(next(priced).values()) for _ in steps] for steps in points]
        for k, t in enumerate(flat_tiers):
            whole_tiers[k // len(points[0])] |= t
        assert got == want and tiers == whole_tiers
