"""Rate matching and Pareto picking against plain-loop restatements of 0.12.0's rules (hypothesis-generated inputs)."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from perfledger.estimator.plan.pareto import CLUSTER, pareto_front, top, with_cluster
from perfledger.estimator.plan.rate_match import Pools, match

POOLS = Pools(max_prefill=8, max_decode=6, replica_gpus=frozenset({1, 2, 4, 8, 16}), prefill_degradation=0.9,
              decode_degradation=0.92)


def loop_match(p_rate, p_gpus, d_rate, d_gpus, pools: Pools) -> tuple[int, int]:
    """0.12.0's walk: decode counts outer, prefill inner, the first strictly better rate per GPU wins."""
    best, out = 0.0, (-1, -1)
    for dn in range(1, pools.max_decode + 1):
        for pn in range(1, pools.max_prefill + 1):
            gpus = p_gpus * pn + d_gpus * dn
            if gpus not in pools.replica_gpus:
                continue
            per_gpu = min(p_rate * pn * pools.prefill_degradation, d_rate * dn * pools.decode_degradation) / gpus
            if per_gpu > best:
                best, out = per_gpu, (pn, dn)
    return out


rates = st.floats(min_value=0.0, max_value=50.0, allow_nan=False).map(lambda x: round(x, 3))
gpu_counts = st.sampled_from([1, 2, 4, 8])
pairs = st.lists(st.tuples(rates, gpu_counts, rates, gpu_counts), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(pairs)
def test_match_equals_the_loop(rows):
    p_rate, p_gpus, d_rate, d_gpus = (np.array(c) for c in zip(*rows, strict=True))
    got_p, got_d = match(p_rate, p_gpus, d_rate, d_gpus, POOLS)
    want = [loop_match(*r, POOLS) for r in rows]
    assert list(zip(got_p.tolist(), got_d.tolist(), strict=True)) == want


def test_match_without_an_allowed_replica_size_is_minus_one():
    p, d = match([2.0], [8], [3.0], [16], POOLS)  # 8 + 16 = 24 GPUs is not an allowed replica size
    assert (p.tolist(), d.tolist()) == ([-1], [-1])


def test_match_prefers_fewer_workers_on_equal_rate_per_gpu():
    # 1P1D and 2P2D give the same rate per GPU: the first met (fewest decode, then prefill workers) is kept
    p, d = match([1.0], [1], [1.0 * 0.9 / 0.92], [1], POOLS)
    assert (p.tolist(), d.tolist()) == ([1], [1])


def loop_front(points: list[tuple[float, float]]) -> set[int]:
    """Indices no other point dominates (>= on both axes, > on one); of identical points the first in x order."""
    order = sorted(range(len(points)), key=lambda i: points[i][0])
    kept: list[int] = []
    for i in order:
        x, y = points[i]
        if any(points[j][0] >= x and points[j][1] >= y for j in kept):
            continue
        kept = [j for j in kept if not (x >= points[j][0] and y >= points[j][1])] + [i]
    return set(kept)


coords = st.floats(min_value=0.0, max_value=100.0, allow_nan=False).map(lambda v: round(v, 1))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(coords, coords), min_size=1, max_size=30))
def test_front_is_the_non_dominated_set(points):
    frame = pl.DataFrame({"x": [p[0] for p in points], "y": [p[1] for p in points], "i": list(range(len(points)))})
    front = pareto_front(frame, "x", "y")
    assert set(front["i"].to_list()) == loop_front(points)
    assert front["x"].to_list() == sorted(front["x"].to_list())


def test_front_drops_non_finite_points():
    frame = pl.DataFrame({"x": [1.0, float("inf"), 2.0], "y": [5.0, 9.0, float("nan")]})
    assert pareto_front(frame, "x", "y")["x"].to_list() == [1.0]


def _rows(**cols) -> pl.DataFrame:
    return pl.DataFrame(cols)


def test_cluster_throughput_counts_whole_replicas():
    rows = with_cluster(_rows(tokens_per_s_per_gpu=[100.0, 100.0], gpus=[3, 8]), 8)
    assert rows["replicas"].to_list() == [2, 1]
    assert rows[CLUSTER].to_list() == [75.0, 100.0]  # 2 replicas of 3 GPUs leave 2 of 8 idle


def test_top_keeps_the_best_per_layout_meeting_tpot_ranked():
    rows = with_cluster(_rows(tokens_per_s_per_gpu=[50.0, 90.0, 80.0, 70.0, 99.0],
                              tokens_per_s_per_user=[10.0, 20.0, 30.0, 40.0, 50.0],
                              tpot_ms=[20.0, 25.0, 15.0, 10.0, 40.0], gpus=[8] * 5), 8)
    picked = top(rows, tpot_target=30.0, group=["a", "a", "b", "b", "b"], top_n=5)
    # a: 90 (tpot 25); b: 80 (99 misses TPOT); ranked by cluster throughput
    assert picked["tokens_per_s_per_gpu"].to_list() == [90.0, 80.0]
    assert top(rows, tpot_target=5.0, group=["a"] * 5, top_n=5).is_empty()
