"""MLA module ops (mla_context_module / mla_generation_module): parity with 0.12.0 inside the data."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from estimator.batch import estimate
from estimator.errors import NoDataError

VLLM = {"backend": "vllm", "version": "0.24.0"}


def query(op: str, system: str, kv: str, gemm: str, heads: int, batch: int, s: int) -> pl.DataFrame:
    row = {"system": system, **VLLM, "kv_quant": kv, "gemm_quant": gemm, "heads": heads, "batch": batch}
    row.update({"fmha_quant": "bfloat16", "isl": s} if op == "mla_context_module" else {"seq": s})
    return pl.DataFrame({k: [v] for k, v in row.items()})


def test_exact_rows_are_the_table(wheel_est):
    rows = wheel_est.table("h200_sxm", "vllm", "0.24.0", "mla_context_module_perf", shared=True).filter(
        (pl.col("kv_cache_dtype") == "bfloat16") & (pl.col("gemm_type") == "bfloat16") & (pl.col("num_heads") == 8)
        & (pl.col("batch_size") == 8) & (pl.col("isl") == 4096))
    out = estimate(wheel_est, "mla_context_module", query("mla_context_module", "h200_sxm", "bfloat16", "bfloat16", 8, 8, 4096))
    assert out["latency_ms"][0] == rows["latency"][0] and out["source"][0] == "silicon"


def test_unknown_gemm_quant_is_a_named_miss(wheel_est):
    with pytest.raises(NoDataError, match="gemm_type=nvfp4"):
        estimate(wheel_est, "mla_generation_module", query("mla_generation_module", "h200_sxm", "bfloat16", "nvfp4", 8, 8, 100))


@pytest.mark.aic
@pytest.mark.parametrize("system", ["h200_sxm", "b200_sxm"])
@pytest.mark.parametrize("phase", ["context", "generation"])
def test_module_matches_reference_inside_the_data(wheel_est, oracle, system, phase):
    """Random heads (collected or between), quants, batch and isl / kv length inside the tables."""
    from aiconfigurator_core.sdk.operations import MLAModule

    common, ctx = oracle.common, phase == "context"
    handle = oracle.handle(system, "vllm", "0.24.0")
    rng = np.random.default_rng(7 if ctx else 8)
    for _ in range(40):
        heads = int(rng.choice([1, 2, 4, 8, 16, 32, 64, 128])) if rng.random() < 0.7 else int(rng.integers(1, 128))
        kv, gemm = str(rng.choice(["bfloat16", "fp8"])), str(rng.choice(["bfloat16", "fp8_block"]))
        batch = int(np.exp(rng.uniform(0, np.log(256 if ctx else 512))))
        s = int(np.exp(rng.uniform(np.log(3), np.log(32768))))
        op = MLAModule("m", 1.0, ctx, heads, common.KVCacheQuantMode[kv], common.FMHAQuantMode.bfloat16,
                       common.GEMMQuantMode[gemm], native_num_heads=128)
        ref = handle.evaluate_ops_json(oracle.build([op]), is_context=ctx, batch_size=batch, s=s,
                                       x=batch * s if ctx else batch)[0][1]
        name = f"mla_{phase}_module"
        ours = estimate(wheel_est, name, query(name, system, kv, gemm, heads, batch, s))["latency_ms"][0]
        assert ours == pytest.approx(ref, rel=1e-6), (heads, kv, gemm, batch, s)
