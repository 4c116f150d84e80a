"""GEMM parity with aiconfigurator-core 0.12.0 on the wheel's data: SILICON, HYBRID, EMPIRICAL."""

from __future__ import annotations

import zlib

import numpy as np
import polars as pl
import pytest

from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import EstimatorError
from tests.estimator.querygen import gemm_queries

pytestmark = pytest.mark.aic

REL = 1e-6
SLICES = [
    ("h200_sxm", "trtllm", "1.3.0rc20"),
    ("b200_sxm", "sglang", "0.5.14"),
    ("l40s", "vllm", "0.24.0"),
    ("gb200", "trtllm", "1.3.0rc20"),
    ("h100_sxm", "vllm", "0.24.0"),
]


def _compare(est, oracle, system, backend, version, quant, m, n, k, mode, lp=False):
    """Row-by-row: both miss, or both answer within REL (and with the same provenance label)."""
    frame = pl.DataFrame({"system": system, "backend": backend, "version": version, "quant": quant, "m": m, "n": n, "k": k,
                          "low_precision_input": lp})
    ours = []
    for i in range(frame.height):  # per row so one miss does not hide the others
        try:
            row = estimate(est, "gemm", frame[i], mode=mode.lower()).row(0, named=True)
            ours.append((row["latency_ms"], row["source"]))
        except EstimatorError:
            ours.append((None, None))
    worst, answered = 0.0, 0
    for i, (lat, src) in enumerate(ours):
        ref, prov = oracle.gemm(system, backend, version, quant, m[i], n[i], k[i], mode=mode, low_precision_input=lp)
        assert (lat is None) == (ref is None), f"{system} {quant} m={m[i]} n={n[i]} k={k[i]}: ours {lat} ref {ref}"
        if ref is not None:
            answered += 1
            worst = max(worst, abs(lat - ref) / ref)
            if mode != "SILICON":
                assert src == (prov or "silicon"), f"{quant} ({m[i]},{n[i]},{k[i]}): label {src} vs {prov}"
    assert worst <= REL, f"{system}/{backend} {quant}: max rel err {worst}"
    return answered


@pytest.mark.parametrize("system,backend,version", SLICES)
def test_silicon_gemm_matches_reference(wheel_est, oracle, system, backend, version):
    rng = np.random.default_rng(zlib.crc32(f"{system}/{backend}".encode()))
    table = wheel_est.table(system, backend, version, "gemm_perf", shared=True)
    grid_n, grid_k = table["n"].unique().to_numpy(), table["k"].unique().to_numpy()
    spec = wheel_est.spec(system)
    answered = 0
    for quant in table["gemm_dtype"].unique().sort().to_list():
        if quant == "nvfp4" and "fp4" not in spec.flops:
            continue
        m, n, k = gemm_queries(rng, grid_n, grid_k, 150)
        answered += _compare(wheel_est, oracle, system, backend, version, quant, m, n, k, "SILICON")
    assert answered > 300


@pytest.mark.parametrize("mode", ["HYBRID", "EMPIRICAL"])
@pytest.mark.parametrize("quant", ["bfloat16", "fp8", "int4_wo", "int8_wo", "sq", "nvfp4_wo", "fp8_ootb"])
def test_hybrid_empirical_gemm_match_reference(wheel_est, oracle, mode, quant):
    rng = np.random.default_rng(zlib.crc32(f"{mode}/{quant}".encode()))
    table = wheel_est.table("h200_sxm", "trtllm", "1.3.0rc20", "gemm_perf", shared=True)
    m, n, k = gemm_queries(rng, table["n"].unique().to_numpy(), table["k"].unique().to_numpy(), 120)
    assert _compare(wheel_est, oracle, "h200_sxm", "trtllm", "1.3.0rc20", quant, m, n, k, mode) == 120


@pytest.mark.parametrize("system,backend,version", SLICES)
def test_fp8_static_gemm_matches_reference(wheel_est, oracle, system, backend, version):
    """fp8 GEMM minus compute_scale (and scale_matrix for low-precision inputs): inside, between and beyond
    the quantize (m, k) grid; SILICON, HYBRID and EMPIRICAL (labels included)."""
    rng = np.random.default_rng(zlib.crc32(f"fp8_static/{system}".encode()))
    table = wheel_est.table(system, backend, version, "gemm_perf", shared=True)
    answered = 0
    for lp in (False, True):
        m, n, k = gemm_queries(rng, table["n"].unique().to_numpy(), table["k"].unique().to_numpy(), 60)
        for mode in ("SILICON", "HYBRID", "EMPIRICAL"):
            answered += _compare(wheel_est, oracle, system, backend, version, "fp8_static", m, n, k, mode, lp)
    assert answered > 100


def test_big_mixed_batch_matches_reference_and_single_rows(wheel_est, oracle):
    """One 40k-row frame over three quants (peeled slices, blocked site evaluation, integer-m slot table)
    equals the reference on every row, and equals one-row batches bit for bit; so does float m."""
    system, backend, version = "h200_sxm", "trtllm", "1.3.0rc20"
    rng = np.random.default_rng(7)
    count = 40_000
    table = wheel_est.table(system, backend, version, "gemm_perf", shared=True)
    grid_n, grid_k = (v[(v >= 256) & (v <= 40_000)] for v in (table[c].unique().to_numpy() for c in ("n", "k")))
    off = np.exp(rng.uniform(np.log(256), np.log(40_000), (count, 2))).astype(np.int64)
    on_grid = rng.random(count) < 0.4
    n = np.where(on_grid, rng.choice(grid_n, count), off[:, 0])
    k = np.where(on_grid, rng.choice(grid_k, count), off[:, 1])
    m = np.exp(rng.uniform(0, np.log(60_000), count)).astype(np.int64)  # past the last collected m too
    quant = rng.choice(["bfloat16", "fp8", "fp8_block"], count)
    frame = pl.DataFrame({"system": system, "backend": backend, "version": version, "quant": quant, "m": m, "n": n, "k": k})
    got = estimate(wheel_est, "gemm", frame)["latency_ms"].to_numpy()
    ref = np.array([oracle.gemm(system, backend, version, q, mi, ni, ki)[0]
                    for q, mi, ni, ki in zip(quant, m, n, k, strict=True)],
                   dtype=np.float64)
    assert np.isfinite(ref).all()
    assert np.max(np.abs(got - ref) / ref) <= REL
    floats = frame.with_columns(pl.col("m") + 0.5)
    got_f = estimate(wheel_est, "gemm", floats)["latency_ms"].to_numpy()
    for i in rng.choice(count, 150, replace=False):
        assert estimate(wheel_est, "gemm", frame[int(i)])["latency_ms"][0] == got[i]
        assert estimate(wheel_est, "gemm", floats[int(i)])["latency_ms"][0] == got_f[i]


@pytest.mark.parametrize("slices", [3, 10])  # peeled by masks / past the peel limit, grouped by polars
def test_frame_of_many_slices_equals_per_slice_answers(wheel_est, slices):
    rng = np.random.default_rng(slices)
    combos = [(s, b, v, q) for s, b, v in SLICES for q in ("bfloat16", "fp8")][:slices]
    pick = rng.integers(0, slices, 3000)
    m = np.exp(rng.uniform(0, np.log(20_000), 3000)).astype(np.int64)
    n, k = (np.exp(rng.uniform(np.log(512), np.log(16_384), 3000)).astype(np.int64) for _ in range(2))
    cols = {c: [combos[i][j] for i in pick] for j, c in enumerate(("system", "backend", "version", "quant"))}
    frame = pl.DataFrame({**cols, "m": m, "n": n, "k": k, "mode": np.where(pick % 2 == 0, "silicon", "hybrid")})
    got = estimate(wheel_est, "gemm", frame)
    for i in range(slices):
        rows = np.flatnonzero(pick == i)
        alone = estimate(wheel_est, "gemm", frame[rows])
        assert got[rows]["latency_ms"].to_list() == alone["latency_ms"].to_list()
        assert got[rows]["source"].to_list() == alone["source"].to_list()
