"""MoE and NCCL SILICON parity with aiconfigurator-core 0.12.0 on the wheel's data."""

from __future__ import annotations

import zlib

import numpy as np
import polars as pl
import pytest

from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import EstimatorError

pytestmark = pytest.mark.aic

REL = 1e-6
MOE_SLICES = [
    ("h200_sxm", "trtllm", "1.3.0rc20"),
    ("b200_sxm", "trtllm", "1.3.0rc20"),
    ("gb200", "sglang", "0.5.14"),
    ("h100_sxm", "vllm", "0.24.0"),
    ("l40s", "trtllm", "1.3.0rc20"),
]
MOE_KEYS = ["moe_dtype", "distribution", "topk", "num_experts", "hidden_size", "inter_size", "moe_tp_size", "moe_ep_size"]
TOKENS = [1, 3, 100, 128, 129, 1000, 3000, 16384, 20000, 65536]


def _ours(est, op, row: dict):
    try:
        return estimate(est, op, pl.DataFrame({k: [v] for k, v in row.items()})).item(0, "latency_ms")
    except EstimatorError:
        return None


def _check(pairs):
    worst = 0.0
    for what, ours, ref in pairs:
        assert (ours is None) == (ref is None), f"{what}: ours {ours} ref {ref}"
        if ref:
            worst = max(worst, abs(ours - ref) / ref)
    assert worst <= REL, f"max rel err {worst}"
    return sum(1 for _, _, ref in pairs if ref is not None)


@pytest.mark.parametrize("system,backend,version", MOE_SLICES)
def test_moe_silicon_matches_reference(wheel_est, oracle, system, backend, version):
    rng = np.random.default_rng(zlib.crc32(f"{system}/{backend}".encode()))
    from perfledger.estimator.ops.moe import apply_quant_overrides

    table = apply_quant_overrides(wheel_est.table(system, backend, version, "moe_perf", shared=True, dedupe=False))
    table = table.filter(~pl.col("kernel_source").str.contains("min_latency"))
    slices = table.with_columns(gated=~pl.col("kernel_source").str.contains("nongated")).select(MOE_KEYS + ["gated"]).unique()
    slices = slices.filter(pl.col("moe_dtype").is_in(list(oracle.common.MoEQuantMode.__members__))).sort(MOE_KEYS + ["gated"])
    pairs = []
    for j in rng.choice(slices.height, min(40, slices.height), replace=False):
        r = slices.row(int(j), named=True)
        key = dict(system=system, backend=backend, version=version, quant=r["moe_dtype"], distribution=r["distribution"],
                   gated=r["gated"], topk=r["topk"], experts=r["num_experts"], hidden=r["hidden_size"],
                   inter=r["inter_size"], tp=r["moe_tp_size"], ep=r["moe_ep_size"])
        off = dict(key, inter=key["inter"] + 64)  # an uncollected shape: both must miss
        for tokens in TOKENS + [int(rng.integers(1, 70_000))]:
            pairs.append((f"{key} t={tokens}", _ours(wheel_est, "moe", {**key, "tokens": tokens}),
                          oracle.moe(**key, tokens=tokens)[0]))
        pairs.append((f"{off}", _ours(wheel_est, "moe", {**off, "tokens": 64}), oracle.moe(**off, tokens=64)[0]))
    assert _check(pairs) >= 200


@pytest.mark.parametrize("system", ["h200_sxm", "gb200", "b200_sxm", "h100_sxm"])
def test_nccl_silicon_matches_reference(wheel_est, oracle, system):
    rng = np.random.default_rng(zlib.crc32(system.encode()))
    pairs = []
    for op in ("all_gather", "reduce_scatter", "all_reduce", "alltoall"):
        for quant in ("half", "int8"):
            for n in (1, 2, 3, 4, 6, 8, 16, 64, 144):
                for el in [64, 256, *np.exp(rng.uniform(np.log(16), np.log(4e9), 4)).astype(int)]:
                    row = dict(system=system, op=op, quant=quant, num_gpus=n, elements=int(el))
                    ref = oracle.nccl(system, "trtllm", "1.3.0rc20", op, quant, n, el)[0]
                    pairs.append((str(row), _ours(wheel_est, "comm", row), ref))
    assert _check(pairs) >= 300


@pytest.mark.parametrize("system,backend,version", [("h200_sxm", "trtllm", "1.3.0rc20"), ("gb200", "trtllm", "1.3.0rc20"),
                                                    ("b200_sxm", "sglang", "0.5.14"), ("h100_sxm", "vllm", "0.24.0")])
def test_custom_allreduce_silicon_matches_reference(wheel_est, oracle, system, backend, version):
    pairs = []
    for tp in (1, 2, 4, 8, 16, 72):
        for tokens in (1, 3, 100, 1000, 8192, 100_000, 1_000_000):
            for hidden in (4096, 7168):
                row = dict(system=system, backend=backend, version=version, tp=tp, elements=tokens * hidden)
                ref = oracle.allreduce(system, backend, version, tp, hidden, tokens)[0]
                pairs.append((str(row), _ours(wheel_est, "allreduce", row), ref))
    assert _check(pairs) >= 70


@pytest.mark.parametrize("mode", ["EMPIRICAL", "HYBRID"])
def test_moe_empirical_and_hybrid_match_reference(wheel_est, oracle, mode):
    """Own-slice util grids, shape transfer (one or several features differ; both kernel families are
    candidates) and quant/profile transfer (labels included)."""
    base = dict(system="h200_sxm", backend="trtllm", version="1.3.0rc20", distribution="power_law_1.2", gated=True,
                topk=8, experts=128, hidden=4096, inter=1536, tp=1, ep=8)
    worst, count = 0.0, 0
    for quant in ("fp8", "bfloat16", "fp8_block", "int4_wo", "nvfp4", "w4afp8", "w4a16_mxfp4"):
        for var in ({}, {"inter": 1600}, {"experts": 100}, {"tp": 2, "ep": 4}, {"hidden": 2048, "topk": 6},
                    {"hidden": 2048, "inter": 2000, "experts": 64}, {"topk": 10, "experts": 160, "inter": 2000}):
            key = {**base, **var, "quant": quant}
            for tokens in (1, 5, 300, 3000, 50_000):
                ref, prov = oracle.moe(**key, tokens=tokens, mode=mode)
                frame = pl.DataFrame({**{k: [v] for k, v in key.items()}, "tokens": [tokens]})
                if ref is None:  # e.g. nvfp4 on a GPU without FP4 FLOP/s: we must refuse too
                    with pytest.raises(EstimatorError):
                        estimate(wheel_est, "moe", frame, mode=mode.lower())
                    continue
                row = estimate(wheel_est, "moe", frame, mode=mode.lower()).row(0, named=True)
                assert row["source"] == (prov or "silicon"), f"{key} t={tokens}"
                worst, count = max(worst, abs(row["latency_ms"] - ref) / ref), count + 1
    assert worst <= REL and count >= 100


def _labelled(est, op, row: dict, mode: str):
    try:
        out = estimate(est, op, pl.DataFrame({k: [v] for k, v in row.items()}), mode=mode.lower()).row(0, named=True)
    except EstimatorError:
        return None, None
    return out["latency_ms"], out["source"]


def _check_labelled(triples):
    """(what, (ours, label), (ref, provenance)): both miss, or agree within REL with the same label."""
    worst = 0.0
    for what, (ours, label), (ref, prov) in triples:
        assert (ours is None) == (ref is None), f"{what}: ours {ours} ref {ref}"
        if ref is None:
            continue
        # the reference reports no provenance where nothing beyond silicon fired (or an analytic zero)
        assert label == prov if prov is not None else label in ("silicon", "sol"), f"{what}: {label} vs {prov}"
        if ref:
            worst = max(worst, abs(ours - ref) / ref)
    assert worst <= REL, f"max rel err {worst}"
    return sum(1 for *_, (ref, _) in triples if ref)


@pytest.mark.parametrize("mode", ["EMPIRICAL", "HYBRID"])
@pytest.mark.parametrize("system", ["h200_sxm", "gb200"])
def test_nccl_empirical_and_hybrid_match_reference(wheel_est, oracle, system, mode):
    """Own-slice util grids over message size; fan-out beyond the data borrows the top slice (xshape)."""
    rng = np.random.default_rng(zlib.crc32(f"{system}/{mode}".encode()))
    triples = []
    for op in ("all_gather", "reduce_scatter", "all_reduce", "alltoall"):
        for quant in ("half", "int8"):
            for n in (1, 2, 3, 8, 16, 144):
                for el in [64, 300, *np.exp(rng.uniform(np.log(16), np.log(4e9), 3)).astype(int)]:
                    row = dict(system=system, op=op, quant=quant, num_gpus=n, elements=int(el))
                    triples.append((f"{mode} {row}", _labelled(wheel_est, "comm", row, mode),
                                    oracle.nccl(system, "trtllm", "1.3.0rc20", op, quant, n, el, mode=mode)))
    assert _check_labelled(triples) >= 150


@pytest.mark.parametrize("mode", ["EMPIRICAL", "HYBRID"])
def test_custom_allreduce_empirical_and_hybrid_match_reference(wheel_est, oracle, mode):
    triples = []
    for system, backend, version in [("h200_sxm", "trtllm", "1.3.0rc20"), ("gb200", "trtllm", "1.3.0rc20"),
                                     ("h100_sxm", "vllm", "0.24.0")]:
        for tp in (1, 2, 3, 4, 8, 16, 72):
            for tokens in (1, 3, 100, 8192, 1_000_000):
                row = dict(system=system, backend=backend, version=version, tp=tp, elements=tokens * 7168)
                triples.append((f"{mode} {row}", _labelled(wheel_est, "allreduce", row, mode),
                                oracle.allreduce(system, backend, version, tp, 7168, tokens, mode=mode)))
    assert _check_labelled(triples) >= 60
