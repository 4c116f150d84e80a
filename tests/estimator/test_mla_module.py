"""MLA module ops (mla_context_module / mla_generation_module): parity with 0.12.0 inside and out of the data.

Out of the data the Grid transfers util with the module rooflines (decode: one roofline over kernel + BMMs);
vLLM tables also read trtllm's `default` rows (cross-backend lenders); multi-model tables split by native heads.
"""

from __future__ import annotations

import zlib

import numpy as np
import polars as pl
import pytest

from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import MissingFlopsError, NoDataError
from perfledger.estimator.ops.mla.module import native_partition

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


def test_uncollected_gemm_quant_is_a_named_miss(wheel_est):
    with pytest.raises(NoDataError, match="gemm_type=fp8"):
        estimate(wheel_est, "mla_generation_module", query("mla_generation_module", "h200_sxm", "bfloat16", "fp8", 8, 8, 100))


def test_gemm_quant_without_system_flops_names_the_flops(wheel_est):
    """0.12.0 raises MissingSystemFlopsError here too: the decode block's BMMs run at the GEMM quant (nvfp4 → fp4)."""
    with pytest.raises(MissingFlopsError, match="fp4_tc_flops"):
        estimate(wheel_est, "mla_generation_module", query("mla_generation_module", "h200_sxm", "bfloat16", "nvfp4", 8, 8, 100))


def test_generation_roofline_is_one_roofline_over_the_block(wheel_est):
    """max(Σ math, Σ memory) over kernel + 2 BMMs: equal to the summed rooflines while all parts are memory
    bound, below them once the kernel turns compute bound (many heads, long kv)."""
    from perfledger.estimator.fit.roofline import generation_mla_sol, mla_bmm_sol
    from perfledger.estimator.ops.mla.kernels import dims

    spec = wheel_est.spec("h200_sxm")
    def sol(h, b, s):
        return estimate(wheel_est, "mla_generation_module", query(
            "mla_generation_module", "h200_sxm", "bfloat16", "bfloat16", h, b, s))["sol_ms"][0]
    def parts(h, b, s):
        return (generation_mla_sol(b, s, h, 2.0, dims(), spec.tc_flops("bfloat16"), spec.mem_bw)[0]
                                 + 2 * mla_bmm_sol(b, h, 2.0, dims(), spec.tc_flops("bfloat16"), spec.mem_bw)[0])
    assert sol(8, 64, 100) == pytest.approx(parts(8, 64, 100), rel=1e-12)
    assert sol(256, 42, 4856) < 0.9 * parts(256, 42, 4856)


def _frame(rows: dict) -> pl.DataFrame:
    return pl.DataFrame({k: [v] for k, v in rows.items()})


def test_native_partition_picks_exact_then_below_then_smallest():
    rows = pl.DataFrame({"model": ["deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K3"], "latency": [1.0, 2.0]})
    def pick(n):
        return native_partition(rows, n, "t")["latency"].to_list()
    assert (pick(128), pick(200), pick(127), pick(96), pick(7)) == ([1.0], [1.0], [2.0], [2.0], [2.0])
    with pytest.raises(NoDataError, match=r"t: rows of 2 native head counts \[96, 128\].*pass native_heads"):
        pick(0)
    one = rows.filter(pl.col("latency") == 1.0)
    assert native_partition(one, 0, "t").height == native_partition(one, 96, "t").height == 1


def _ref_module(oracle, row: dict, mode: str = "SILICON"):
    """0.12.0's latency (None on a missing-data error) and provenance for one module query."""
    from aiconfigurator_core.sdk.operations import MLAModule

    c, ctx = oracle.common, "isl" in row
    native = {"native_num_heads": row["native_heads"]} if row.get("native_heads") else {}
    op = MLAModule("m", 1.0, ctx, row["heads"], c.KVCacheQuantMode[row["kv_quant"]],
                   c.FMHAQuantMode[row.get("fmha_quant", "bfloat16")], c.GEMMQuantMode[row["gemm_quant"]], **native)
    s = row["isl"] if ctx else row["seq"]
    handle = oracle.handle(row["system"], row["backend"], row["version"], mode)
    try:
        out = handle.evaluate_ops_json(oracle.build([op]), is_context=ctx, batch_size=row["batch"], s=s,
                                       x=row["batch"] * s if ctx else row["batch"])[0][1]
    except Exception as exc:
        if "PerfDataNotAvailable" in type(exc).__name__ or "Empirical" in type(exc).__name__:
            return None, None
        raise
    return out, handle.last_provenance() or "silicon"


def _out_of_data_rows(est, system: str, backend: str, version: str, phase: str, rng, count: int, native: int):
    """Random module queries over the table's quants: heads to 255, batch to 4096, isl / kv length far
    beyond the data, a quarter at s ≤ 3 (below the first collected decode step)."""
    table = est.table(system, backend, version, f"mla_{phase}_module_perf", shared=True)
    kvs, gemms, fmhas = (sorted(table[c].unique().to_list()) for c in ("kv_cache_dtype", "gemm_type", "mla_dtype"))
    for i in range(count):
        heads = int(rng.choice([1, 2, 4, 8, 16, 32, 64, 128])) if rng.random() < 0.6 else int(rng.integers(1, 256))
        s = int(rng.choice([2, 3])) if i % 4 == 0 else int(np.exp(rng.uniform(np.log(2), np.log(300000))))
        row = {"system": system, "backend": backend, "version": version, "kv_quant": str(rng.choice(kvs)),
               "gemm_quant": str(rng.choice(gemms)), "heads": heads, "batch": int(np.exp(rng.uniform(0, np.log(4096)))),
               "native_heads": native}
        yield {**row, "fmha_quant": str(rng.choice(fmhas)), "isl": s} if phase == "context" else {**row, "seq": s}


def _assert_parity(est, oracle, rows, phase: str, mode: str = "SILICON") -> int:
    answered = 0
    for row in rows:
        ref, ref_label = _ref_module(oracle, row, mode)
        try:
            out = estimate(est, f"mla_{phase}_module", _frame(row), mode=mode.lower())
            ours, label = out["latency_ms"][0], out["source"][0]
        except NoDataError:
            ours = label = None
        assert (ours is None) == (ref is None), (row, ours, ref)
        if ref is not None:
            assert ours == pytest.approx(ref, rel=1e-6) and label == ref_label, (row, ours, ref, label, ref_label)
            answered += 1
    return answered


@pytest.mark.aic
@pytest.mark.parametrize("phase", ["context", "generation"])
@pytest.mark.parametrize("system,backend,version", [
    ("h200_sxm", "vllm", "0.24.0"), ("b200_sxm", "vllm", "0.24.0"),  # own rows only
    ("h100_sxm", "vllm", "0.24.0"), ("rtx_pro_6000_server", "vllm", "0.24.0"),  # + trtllm default rows
    ("gb200", "trtllm", "1.3.0rc20")])
def test_module_matches_reference_out_of_the_data(wheel_est, oracle, system, backend, version, phase):
    rng = np.random.default_rng(zlib.crc32(f"mla-module/{system}/{backend}/{phase}".encode()))
    rows = _out_of_data_rows(wheel_est, system, backend, version, phase, rng, 40, 128)
    assert _assert_parity(wheel_est, oracle, rows, phase) >= 25


@pytest.mark.aic
@pytest.mark.parametrize("native", [0, 64, 96, 128, 200])
def test_multi_model_table_splits_by_native_heads(wheel_est, oracle, native):
    """gb300 vllm 0.27.0 holds DeepSeek-V3 (128 heads) and Kimi-K3 (96) rows; without native heads both miss."""
    rng = np.random.default_rng(native)
    for phase in ("context", "generation"):
        rows = list(_out_of_data_rows(wheel_est, "gb300", "vllm", "0.27.0", phase, rng, 12, native))
        answered = _assert_parity(wheel_est, oracle, rows, phase)
        assert answered == 0 if native == 0 else answered >= 6


@pytest.mark.aic
@pytest.mark.parametrize("mode", ["EMPIRICAL", "HYBRID"])
def test_module_empirical_and_hybrid_match_reference(wheel_est, oracle, mode):
    """0.12.0 has module EMPIRICAL: SOL / util from a UtilGrid over the own version's samples (label empirical)."""
    for system in ("h200_sxm", "h100_sxm"):
        for phase in ("context", "generation"):
            rng = np.random.default_rng(zlib.crc32(f"mla-module/{mode}/{system}/{phase}".encode()))
            rows = _out_of_data_rows(wheel_est, system, "vllm", "0.24.0", phase, rng, 15, 128)
            assert _assert_parity(wheel_est, oracle, rows, phase, mode) >= 8


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
