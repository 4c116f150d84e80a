"""MoE and NCCL SILICON parity with aiconfigurator-core 0.12.0 on the wheel's data."""

from __future__ import annotations

import zlib

import numpy as np
import polars as pl
import pytest

from estimator.batch import estimate
from estimator.errors import EstimatorError

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
    from estimator.ops.moe import apply_quant_overrides

    table = apply_quant_overrides(wheel_est.table(system, backend, version, "moe_perf", shared=True, dedupe=False))
    table = table.filter(~pl.col("kernel_source").str.contains("min_latency"))
    slices = table.with_columns(gated=~pl.col("kernel_source").str.contains("nongated")).select(MOE_KEYS + ["gated"]).unique()
    slices = slices.filter(pl.col("moe_dtype").is_in(list(oracle.common.MoEQuantMode.__members__))).sort(MOE_KEYS + ["gated"])
    pairs = []
    for j in rng.choice(slices.height, 25, replace=False):
        r = slices.row(int(j), named=True)
        key = dict(system=system, backend=backend, version=version, quant=r["moe_dtype"], distribution=r["distribution"],
                   gated=r["gated"], topk=r["topk"], experts=r["num_experts"], hidden=r["hidden_size"],
                   inter=r["inter_size"], tp=r["moe_tp_size"], ep=r["moe_ep_size"])
        off = dict(key, inter=key["inter"] + 64)  # an uncollected shape: both must miss
        for tokens in TOKENS + [int(rng.integers(1, 70_000))]:
            pairs.append((f"{key} t={tokens}", _ours(wheel_est, "moe", {**key, "tokens": tokens}), oracle.moe(**key, tokens=tokens)[0]))
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
                    pairs.append((str(row), _ours(wheel_est, "comm", row), oracle.nccl(system, "trtllm", "1.3.0rc20", op, quant, n, el)[0]))
    assert _check(pairs) >= 300
