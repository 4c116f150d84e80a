"""Context parallelism (models/context_parallel.py) against 0.12.0 on h200 sglang 0.5.14: every op of a cp layout's
prefill pass, mixed step and decode step against the engine 0.12.0's planner builds for that layout (dense Qwen3-32B,
MoE Qwen3-30B-A3B, gpt-oss-20b's banded and global layers, Gemma-4's and the hybrid MoE family's per-type attention
and KV gathers, DeepSeek-V3's and Kimi-K2.5's MLA block: its granular fallback's causal zigzag and latent KV gather),
`estimate static --cp`, the layouts the search sweeps, and the refusals."""

from __future__ import annotations

from functools import cache

import pytest

from perfledger.estimator.errors import NoDataError, UnsupportedModelError
from perfledger.estimator.models.config import resolve_model
from perfledger.estimator.models.plans.registry import load_model
from perfledger.estimator.plan.evaluate import price_many
from perfledger.estimator.plan.large_ep import switched
from perfledger.estimator.plan.space import Parallel, ParallelWidthError, check_moe_width, enumerate_parallel
from perfledger.estimator.plan.steps import decode_step, mixed_step
from perfledger.estimator.quant.checkpoint import resolve as resolve_quants
from perfledger.estimator.quant.context_fmha import resolve_by_data
from perfledger.estimator.static import Deploy, check_deploy, pass_ops

SYSTEM, BACKEND, VERSION = "h200_sxm", "sglang", "0.5.14"
DENSE, MOE, BANDED = "Qwen/Qwen3-32B", "Qwen/Qwen3-30B-A3B", "openai/gpt-oss-20b"
GEMMA4, SCOUT, MIMO_V2 = "google/gemma-4-26B-A4B", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "XiaomiMiMo/MiMo-V2-Flash"
DSV3, KIMI_K25 = "deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K2.5"


def _deploy(model: str, backend: str = BACKEND, est=None, **parallel) -> tuple:
    """The layout at the checkpoint's quants, an inferred fp8 FMHA settled by `est`'s data as the planner settles it
    (DeepSeek-V3's context MLA on h200 sglang holds bfloat16 FMHA only)."""
    m, config = load_model(model), resolve_model(model)
    quants = resolve_quants(config, backend, {"gemm": None, "moe": None, "kv": None, "fmha": None})
    if est is not None:
        quants = resolve_by_data(quants, config.architecture, est, SYSTEM, backend, VERSION, shared=False)
    return m, Deploy(SYSTEM, backend, VERSION, **parallel, **{f"{q}_quant": v["quant"] for q, v in quants.items()})


@cache
def _reference_engine(model: str, parallel: tuple):
    """0.12.0's planner-built engine of the layout (tp, pp, dp, moe_tp, moe_ep, cp)."""
    from tests.estimator.plan_oracle import planner_engine

    return planner_engine(model, SYSTEM, BACKEND, VERSION, parallel)[0]


def _named(ops, prefix: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, ms, *_ in ops:
        out[name.removeprefix(prefix)] = out.get(name.removeprefix(prefix), 0.0) + ms
    return out


def _assert_ops_equal(ours: dict, theirs: dict, what: str) -> None:
    theirs = {n: ms for n, ms in theirs.items() if ms or n in ours}
    assert set(ours) == set(theirs), what
    for name, ms in theirs.items():
        assert ours[name] == pytest.approx(ms, rel=1e-9, abs=1e-12), f"{what} {name}"


# (model, moe_tp, moe_ep, cp): dense, MoE expert-parallel and expert-TP widths, banded (window 128) layers, MLA (fp8
# and bfloat16 KV latents; at ep 8 the planner switches DeepSeek-V3 to SGLang's DeepEP layer, plan/large_ep.py)
LAYOUTS = [(DENSE, 1, 1, 2), (DENSE, 1, 1, 8), (MOE, 1, 4, 4), (MOE, 4, 1, 4), (MOE, 2, 1, 2), (BANDED, 1, 2, 2),
           (BANDED, 2, 4, 8), (GEMMA4, 1, 2, 2), (GEMMA4, 2, 4, 8), (SCOUT, 1, 2, 2), (SCOUT, 2, 4, 8), (MIMO_V2, 1, 4, 4),
           (DSV3, 1, 2, 2), (DSV3, 2, 2, 4), (DSV3, 8, 1, 8), (KIMI_K25, 1, 4, 4), (DSV3, 1, 8, 8)]
# prefill passes (batch, isl, prefix): divisible and ragged token counts, a cached prefix
PREFILLS = [(1, 4000, 0), (3, 1001, 0), (2, 4001, 1234), (1, 7, 0)]
# mixed steps (ctx tokens, decode requests, isl, osl, prefix): a chunk of one request, two whole requests, a prefix
MIXED = [(4000, 7, 4000, 500, 0), (8000, 30, 4000, 500, 0), (1500, 3, 4000, 500, 0), (8000, 31, 4000, 500, 1000)]


@pytest.mark.aic
@pytest.mark.parametrize("model,moe_tp,moe_ep,cp", LAYOUTS)
def test_context_parallel_passes_match_the_planner_model_per_op(wheel_est, model, moe_tp, moe_ep, cp):
    """Prefill passes, mixed and decode steps op by op at 1e-9: the per-rank token share (ceil on the whole pass),
    the zigzag attention pair, the KV all-gather and the MoE's whole-pass experts and cp collectives; the layout as
    the planner prices it (its large-EP switch applied). A pass the reference cannot price (fewer tokens than DeepEP
    ranks) is no answer here either."""
    from aiconfigurator_core.sdk.errors import PerfDataNotAvailableError

    ref = _reference_engine(model, (1, 1, 1, moe_tp, moe_ep, cp))
    m, d = _deploy(model, est=wheel_est, cp=cp, moe_tp=moe_tp, moe_ep=moe_ep)
    d = switched(wheel_est, m, d, ("context", "generation"))
    check_deploy(m, d, resolve_model(model))
    prefills = []
    for b, isl, p in PREFILLS:
        try:
            ref.run_static_per_op(batch_size=b, isl=isl, osl=2, prefix=p, mode="static_ctx")
            prefills.append((b, isl, p))
        except PerfDataNotAvailableError:
            with pytest.raises(NoDataError, match="leaves a rank no token"):
                pass_ops(m, d, b * (isl - p), True, b, isl, prefix=p)
    assert len(prefills) >= len(PREFILLS) - (1 if d.moe_a2a else 0)
    lists = [pass_ops(m, d, b * (isl - p), True, b, isl, prefix=p) for b, isl, p in prefills]
    lists += [mixed_step(m, d, ctx_tokens=c, gen_requests=g, isl=i, osl=o, prefix=p) for c, g, i, o, p in MIXED]
    lists += [decode_step(m, d, gen_requests=g, isl=i, osl=o) for _, g, i, o, _ in MIXED]
    priced = price_many(wheel_est, lists, wheel_est.spec(SYSTEM))
    for (b, isl, p), ours in zip(prefills, priced, strict=False):
        context, _ = ref.run_static_per_op(batch_size=b, isl=isl, osl=2, prefix=p, mode="static_ctx")
        _assert_ops_equal(ours, _named(context, "context_"), f"prefill {(b, isl, p)}")
    steps = priced[len(prefills):]
    for (c, g, i, o, p), mixed, decode in zip(MIXED, steps, steps[len(MIXED):], strict=False):
        shared, context, generation = ref.mixed_step_breakdown_per_op(c, g, i, o, p, 1.0, 1.0)
        theirs = _named(shared, "context_") | {"context_attention (scaled)": sum(ms for _, ms, *_ in context),
                                              "generation_attention": sum(ms for _, ms, *_ in generation)}
        _assert_ops_equal(mixed, theirs, f"mixed {(c, g, i, o, p)}")
        _assert_ops_equal(decode, _named(ref.decode_step_per_op(g, i, o, 1.0), "generation_"), f"decode {(g, i, o)}")


def test_the_search_sweeps_cp_only_without_attention_tp_or_dp():
    dense = enumerate_parallel("agg", moe=False, backend=BACKEND, system=SYSTEM, total_gpus=8, context_parallel=True)
    assert [p for p in dense if p.cp > 1] == [Parallel(cp=2), Parallel(cp=4), Parallel(cp=8)]
    assert Parallel(cp=2).label == "tp1pp1dp1etp1ep1cp2" and Parallel(cp=2).gpus == 2
    moe = enumerate_parallel("prefill", moe=True, backend=BACKEND, system=SYSTEM, total_gpus=4, context_parallel=True)
    assert {(p.moe_tp, p.moe_ep, p.cp) for p in moe if p.cp > 1} == {(2, 1, 2), (1, 2, 2), (4, 1, 4), (2, 2, 4), (1, 4, 4)}
    assert all(p.tp == p.dp == 1 for p in moe if p.cp > 1)
    assert all(p.cp == 1 for p in enumerate_parallel("decode", moe=True, backend=BACKEND, system=SYSTEM, total_gpus=8,
                                                     context_parallel=True))
    assert all(p.cp == 1 for p in enumerate_parallel("agg", moe=False, backend=BACKEND, system=SYSTEM, total_gpus=8))


@pytest.mark.parametrize("model,backend,parallel,why", [
    (DENSE, "vllm", dict(cp=2), "not priced for Qwen3ForCausalLM on vllm"),
    ("Qwen/Qwen3-VL-8B-Instruct", BACKEND, dict(cp=2), "not priced for Qwen3VLForConditionalGeneration on sglang"),
    (DENSE, BACKEND, dict(cp=2, tp=2), "needs tp 1 and attention-dp 1"),
    (MOE, BACKEND, dict(cp=2, moe_ep=4), "must equal tp 1 x attention-dp 1 x cp 2 = 2"),
])
def test_context_parallel_refusals_name_the_reason(model, backend, parallel, why):
    m, d = _deploy(model, backend, **parallel)
    with pytest.raises((UnsupportedModelError, ParallelWidthError), match=why):
        check_deploy(m, d, resolve_model(model))


def test_moe_width_counts_context_parallel_ranks():
    check_moe_width(1, 1, 2, 2, cp=4)
    with pytest.raises(ParallelWidthError, match="cp must be >= 1"):
        check_moe_width(1, 1, 1, 1, cp=0)


def test_a_disagg_witness_reads_the_tiers_of_its_own_cp_worker():
    """The support matrix grades a disagg witness by its workers' op tiers: a tp1 cp2 prefill is not its tp1 twin."""
    import polars as pl

    from perfledger.estimator.plan.feasible import _worker_tiers

    workers = pl.DataFrame({"tp": [1, 1], "pp": [1, 1], "dp": [1, 1], "moe_tp": [1, 1], "moe_ep": [1, 1], "cp": [1, 2],
                            "batch": [1, 1], "tiers": ["silicon", "silicon,xshape"]})
    best = {"p_tp": 1, "p_pp": 1, "p_dp": 1, "p_moe_tp": 1, "p_moe_ep": 1, "p_cp": 2, "p_batch": 1}
    assert _worker_tiers(workers, best, "p") == {"silicon", "xshape"}
    assert _worker_tiers(workers, {**best, "p_cp": 1}, "p") == {"silicon"}


@pytest.mark.aic
@pytest.mark.parametrize("model,moe_ep,cp", [(DENSE, 1, 2), (GEMMA4, 4, 4), (SCOUT, 2, 2), (DSV3, 2, 2)])
def test_estimate_static_cp_matches_the_planner_engine(wheel_est, model, moe_ep, cp):
    """`estimate static --cp`: TTFT and TPOT of the cp layout equal 0.12.0's planner-built engine's static run."""
    import json

    from typer.testing import CliRunner

    from perfledger.cli import app

    ttft, generation, _ = _reference_engine(model, (1, 1, 1, 1, moe_ep, cp)).run_static(batch_size=3, isl=1001, osl=20)
    args = ["estimate", "static", "--model", model, "--system", SYSTEM, "--backend", BACKEND, "--version", VERSION,
            "--cp", str(cp), "--moe-ep", str(moe_ep), "--batch", "3", "--isl", "1001", "--osl", "20", "--data",
            "aic-package", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["ttft_ms"] == pytest.approx(ttft, rel=1e-9) and out["tpot_ms"] == pytest.approx(generation / 19, rel=1e-9)
    refused = CliRunner().invoke(app, [*args[:7], "vllm", "--version", "0.24.0", *args[10:]])
    assert refused.exit_code == 1 and "not priced for" in json.loads(refused.stdout)["error"]
