"""GEMM site curves on small inline tables: exact hits, lerp, util-hold, IDW transfer, misses."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfledger.estimator.fit.roofline import gemm_sol
from perfledger.estimator.ops.gemm.sites import (
    K_TAIL,
    _tail_median,
    build_sites,
    eval_sites,
    query_slots,
    silicon,
)

FLOPS, BW, MEM = 1e15, 4e12, 2.0


def _table(sites=((1024, 1024), (2048, 1024), (1024, 2048), (2048, 2048))):
    rows = []
    for n, k in sites:
        for m in (1, 16, 256, 4096):
            sol = gemm_sol(m, n, k, MEM, FLOPS, BW)[0]
            rows.append((m, n, k, float(sol) / (0.5 + 0.1 * np.log2(m + 1) / 13)))
    m, n, k, lat = map(np.array, zip(*rows, strict=True))
    return build_sites(m, n, k, lat, MEM, FLOPS, BW), (m, n, k, lat)


def test_exact_hit_returns_measured_latency():
    t, (m, n, k, lat) = _table()
    got, miss = silicon(t, m, n, k)
    assert not miss.any()
    np.testing.assert_array_equal(np.sort(got), np.sort(lat))


def test_inside_curve_is_linear_in_latency():
    t, _ = _table()
    lo, hi = eval_sites(t, [0, 0], [16, 256])
    mid = eval_sites(t, [0], [136])[0]
    assert mid == pytest.approx(lo + (hi - lo) * 120 / 240, rel=1e-12)


def test_beyond_range_holds_median_tail_util():
    t, _ = _table()
    q = 100_000
    got = silicon(t, [q], [1024], [1024])[0][0]
    assert got == pytest.approx(gemm_sol(q, 1024, 1024, MEM, FLOPS, BW)[0] / t.util_high[0], rel=1e-12)


def test_latency_is_clamped_up_to_sol():
    m, n, k = np.array([1, 2]), np.array([64, 64]), np.array([64, 64])
    sol = gemm_sol(m, n, k, MEM, FLOPS, BW)[0]
    t = build_sites(m, n, k, sol / 2, MEM, FLOPS, BW)
    np.testing.assert_allclose(t.lat, sol)


def test_offgrid_blends_util_of_nearest_sites():
    t, _ = _table()
    got, miss = silicon(t, [256], [1448], [1448])  # equidistant from all four sites
    u = [gemm_sol(256, n, k, MEM, FLOPS, BW)[0] / eval_sites(t, [i], [256])[0]
         for i, (n, k) in enumerate(zip(t.site_n, t.site_k, strict=True))]
    assert not miss[0]
    assert got[0] == pytest.approx(gemm_sol(256, 1448, 1448, MEM, FLOPS, BW)[0] / np.mean(u), rel=1e-6)


def test_far_and_scale_down_queries_miss():
    t, _ = _table()
    _, miss = silicon(t, [64, 64], [100_000, 8], [100_000, 8])
    assert miss.all()


def test_single_axis_overflow_is_waived():
    t, _ = _table()
    got, miss = silicon(t, [64], [1 << 20], [1024])
    assert not miss[0] and got[0] > 0


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=4096))
def test_curve_value_lies_between_bracketing_points(m):
    t, _ = _table()
    got = eval_sites(t, [0], [m])[0]
    ms, lats = t.m[t.start[0] : t.stop[0]], t.lat[t.start[0] : t.stop[0]]
    i = np.searchsorted(ms, m)
    lo, hi = (lats[i], lats[i]) if ms[min(i, len(ms) - 1)] == m else (lats[i - 1], lats[i])
    assert min(lo, hi) - 1e-15 <= got <= max(lo, hi) + 1e-15


def test_integer_m_slot_table_agrees_with_binary_search():
    t, _ = _table()
    m = np.concatenate([np.arange(-3, 300), np.arange(4000, 4200), [10**6, 2**40]]).astype(np.int64)
    lut_slots, _ = query_slots(t, m)
    search_slots, _ = query_slots(t, m.astype(np.float64))
    np.testing.assert_array_equal(lut_slots, search_slots)


def test_big_batch_in_blocks_equals_small_batches():
    t, _ = _table()
    rng = np.random.default_rng(3)
    m = np.exp(rng.uniform(0, np.log(20_000), 40_000)).astype(np.int64)
    n, k = (np.exp(rng.uniform(np.log(600), np.log(3000), 40_000)).astype(np.int64) for _ in range(2))
    whole, miss = silicon(t, m, n, k)
    parts = np.concatenate([silicon(t, m[a : a + 997], n[a : a + 997], k[a : a + 997])[0] for a in range(0, 40_000, 997)])
    np.testing.assert_array_equal(whole, parts)
    assert not miss.all()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=30), st.integers(0, 2**32 - 1))
def test_tail_median_equals_numpy_median(sizes, seed):
    util = np.random.default_rng(seed).random(sum(sizes))
    stop = np.cumsum(sizes)
    start = stop - np.array(sizes)
    for lo, hi in ((start, np.minimum(start + K_TAIL, stop)), (np.maximum(stop - K_TAIL, start), stop)):
        np.testing.assert_array_equal(_tail_median(util, lo, hi), [np.median(util[a:b]) for a, b in zip(lo, hi, strict=True)])
