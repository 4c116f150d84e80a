"""Encoder (ViT) attention (encoder_attention_perf): the Grid over [heads][isl][batch] per head_dim, its bidirectional
roofline, EMPIRICAL from the own version's rows; parity with 0.12.0 on every wheel slice in every mode."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from perfledger import settings
from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError, UnknownQuantError

H200 = ("h200_sxm", "vllm", "0.24.0")
MODES = ("silicon", "hybrid", "empirical", "sol")
MISS = {"silicon": NoDataError, "hybrid": EmpiricalUnavailableError, "empirical": EmpiricalUnavailableError}


def frame(system, backend, version, head_dim, heads, isl, batch) -> pl.DataFrame:
    n = len(heads)
    return pl.DataFrame({"system": [system] * n, "backend": [backend] * n, "version": [version] * n,
                         "head_dim": [head_dim] * n, "heads": heads, "isl": isl, "batch": batch})


def wheel_slices() -> list[tuple[str, str, str]]:
    root = settings.aic_package_dir()
    if root is None:
        return []
    files = sorted((root / "systems" / "data").glob("*/encoder_attention/*/*/encoder_attention_perf.parquet"))
    return [(f.parts[-5], f.parts[-3], f.parts[-2]) for f in files]


def test_rows_answer_exactly_and_isl_blends_in_sqrt_latency(wheel_est):
    rows = wheel_est.table(*H200, "encoder_attention_perf", shared=True).filter(
        (pl.col("head_dim") == 72) & (pl.col("num_heads") == 16) & (pl.col("batch_size") == 4)
        & pl.col("isl").is_in([1024, 1296]))
    lat = dict(rows.select("isl", "latency").iter_rows())
    out = estimate(wheel_est, "encoder_attention", frame(*H200, 72, [16, 16, 16], [1024, 1160, 1296], [4, 4, 4]))
    assert out["latency_ms"][0] == lat[1024] and out["latency_ms"][2] == lat[1296]
    mid = ((np.sqrt(lat[1024]) + np.sqrt(lat[1296])) / 2) ** 2
    assert out["latency_ms"][1] == pytest.approx(mid, rel=1e-12)
    assert out["source"].to_list() == ["silicon"] * 3 and (out["sol_ms"] < out["latency_ms"]).all()


def test_roofline_is_the_full_score_matrix_or_the_four_tensors():
    """4·b·n·s²·d FLOPs (no causal half) and Q, K, V, O at 2 bytes each."""
    from perfledger.estimator.fit.roofline import encoder_attention_sol

    sol, math, mem = encoder_attention_sol(3, 1000, 16, 72, 1e12, 1e12)
    assert float(math) == pytest.approx(4 * 3 * 16 * 1000**2 * 72 / 1e9)
    assert float(mem) == pytest.approx(8 * 3 * 1000 * 16 * 72 / 1e9) and float(sol) == float(math)


def test_uncollected_head_dim_misses_everywhere_but_sol_and_only_bf16_is_priced(wheel_est):
    q = frame(*H200, 96, [16], [1024], [4])
    for mode, error in MISS.items():
        with pytest.raises(error, match="96"):
            estimate(wheel_est, "encoder_attention", q, mode=mode)
    assert estimate(wheel_est, "encoder_attention", q, mode="sol")["source"][0] == "sol"
    with pytest.raises(UnknownQuantError, match="fp8"):
        estimate(wheel_est, "encoder_attention", frame(*H200, 72, [16], [1024], [4]).with_columns(fmha_quant=pl.lit("fp8")))


def test_empirical_reads_the_own_version_only(wheel_est):
    """h200 sglang 0.5.16 holds no encoder rows: SILICON reads 0.5.14's through the shared layer, EMPIRICAL has none."""
    q = frame("h200_sxm", "sglang", "0.5.16", 72, [16], [1000], [3])
    own = frame("h200_sxm", "sglang", "0.5.14", 72, [16], [1000], [3])
    assert estimate(wheel_est, "encoder_attention", q)["latency_ms"][0] == estimate(wheel_est, "encoder_attention",
                                                                                    own)["latency_ms"][0]
    with pytest.raises(EmpiricalUnavailableError):
        estimate(wheel_est, "encoder_attention", q, mode="empirical")


def _queries(rng, n: int) -> list[tuple[int, int, int, int]]:
    """(head_dim, heads, isl, batch): collected and between-grid values, beyond the grid (isl > 65536, batch > 64,
    heads > 32) and an uncollected head_dim."""
    grid_heads, grid_isl = [1, 5, 12, 16, 32], [1, 13, 1024, 1296, 6400, 65536]
    out = []
    for i in range(n):
        head_dim = int(rng.choice([64, 72, 80, 96] if i % 6 == 5 else [64, 72, 80]))
        heads = int(rng.choice(grid_heads)) if i % 3 == 0 else int(rng.integers(1, 49))
        isl = int(rng.choice(grid_isl)) if i % 4 == 0 else int(np.exp(rng.uniform(0, np.log(120000))))
        batch = int(np.exp(rng.uniform(0, np.log(256))))
        out.append((head_dim, heads, isl, batch))
    return out


@pytest.mark.aic
@pytest.mark.parametrize("cell", wheel_slices(), ids="/".join)
def test_encoder_attention_matches_reference_in_every_mode(wheel_est, oracle, cell):
    """12 random queries per mode on each of the wheel's 24 slices: value within 1e-9, same tier, same misses."""
    rng = np.random.default_rng(sum(map(ord, "/".join(cell))))
    compared = 0
    for mode in MODES:
        for head_dim, heads, isl, batch in _queries(rng, 12):
            ref, tier = oracle.encoder_attention(*cell, head_dim, heads, isl, batch, mode=mode.upper())
            q = frame(*cell, head_dim, [heads], [isl], [batch])
            where = (mode, head_dim, heads, isl, batch)
            if ref is None:
                with pytest.raises(MISS[mode]):
                    estimate(wheel_est, "encoder_attention", q, mode=mode)
                continue
            out = estimate(wheel_est, "encoder_attention", q, mode=mode)
            assert (out["latency_ms"][0], out["source"][0]) == (pytest.approx(ref, rel=1e-9, abs=0), tier), where
            compared += 1
    assert compared >= 40
