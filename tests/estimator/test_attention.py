"""Context-attention Grid: unit behaviour, and parity with the reference (side memory ops included)."""

from __future__ import annotations

import math
import zlib

import numpy as np
import polars as pl
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from perfledger.estimator.batch import estimate
from perfledger.estimator.fit.grid import coordinate_grid, evaluate, evaluate_many


def _toy():
    sol = lambda q: 1e-3 * q["h"] * q["s"] ** 2 * q["b"]  # noqa: E731
    rows = [((h, s, b), sol({"h": h, "s": s, "b": b}) * 2.0) for h in (8, 16) for s in (64, 256, 1024) for b in (1, 4)
            if not (s == 1024 and b == 4)]  # a corner-truncated staircase
    return coordinate_grid(("h", "s", "b"), rows, sol, sqrt_axes=("s",)), sol


def test_exact_hit_and_sqrt_blend_along_seq():
    g, sol = _toy()
    assert evaluate(g, {"h": 8, "s": 256, "b": 1}) == (sol({"h": 8, "s": 256, "b": 1}) * 2.0, False)
    lo, hi = 2 * sol({"h": 8, "s": 64, "b": 1}), 2 * sol({"h": 8, "s": 256, "b": 1})
    t = (100 - 64) / (256 - 64)
    got, moved = evaluate(g, {"h": 8, "s": 100, "b": 1})
    assert not moved and got == pytest.approx((math.sqrt(lo) + (math.sqrt(hi) - math.sqrt(lo)) * t) ** 2)


def test_ragged_branch_rescales_survivor_by_sol():
    g, sol = _toy()
    got, moved = evaluate(g, {"h": 8, "s": 600, "b": 4})  # s=1024 has no b=4: the s=256 branch survives
    assert not moved and got == pytest.approx(2 * sol({"h": 8, "s": 600, "b": 4}))


def test_out_of_range_transfers_util_from_nearest_leaves():
    g, sol = _toy()
    got, moved = evaluate(g, {"h": 64, "s": 4096, "b": 8})
    assert moved and got == pytest.approx(2 * sol({"h": 64, "s": 4096, "b": 8}))  # every leaf has util 0.5


@settings(max_examples=40, deadline=None)
@given(st.integers(8, 16), st.integers(64, 1024), st.integers(1, 4))
def test_constant_util_tables_reproduce_twice_sol(h, s, b):
    g, sol = _toy()
    got, _ = evaluate(g, {"h": h, "s": s, "b": b})
    assert got > 0


def _roofline(h, s, b):
    """A float64 roofline over arrays (as fit/roofline.py's), scalar-callable too."""
    h, s, b = (np.asarray(a, dtype=np.float64) for a in (h, s, b))
    return np.maximum(2.0 * h * s * s * b / 3e5, (h * s + 7.0 * b) / 11.0)


def _ragged(utils):
    sol = lambda q: float(_roofline(q["h"], q["s"], q["b"]))  # noqa: E731
    keys = [(h, s, b) for h in (8, 16, 32) for s in (64, 256, 1024, 4096) for b in (1, 4, 16)]
    rows = [(k, sol(dict(zip("hsb", k, strict=True))) / u) for k, u in zip(keys, utils, strict=False) if u > 0]
    return lambda: coordinate_grid(("h", "s", "b"), rows, sol, sqrt_axes=("s",))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.05, 1.0) | st.just(0.0), min_size=36, max_size=36),
       st.lists(st.tuples(st.integers(1, 96), st.integers(1, 20000), st.integers(1, 64)), min_size=1, max_size=40))
def test_evaluate_many_equals_evaluate_bit_for_bit(utils, queries):
    """The batched path (vectorised leaf utils, shared descent, chunked transfer) on its own Grid answers every query
    exactly as the one-query path on another; holes (util 0) make ragged brackets and transfers."""
    assume(any(u > 0 for u in utils))
    build = _ragged(utils)
    values, moved = evaluate_many(build(), {a: np.array([q[i] for q in queries]) for i, a in enumerate("hsb")},
                                  lambda c: _roofline(c["h"], c["s"], c["b"]))
    g = build()
    for q, got, got_moved in zip(queries, values, moved, strict=True):
        assert evaluate(g, dict(zip("hsb", q, strict=True))) == (got, got_moved), q



@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 300))
@example(6, 157)  # one query whose 5 nearest leaves are equidistant
@example(58317, 243)  # an in-data sqrt blend where C pow(m, 2) and m * m differ in the last ulp
def test_blocked_transfer_equals_evaluate_bit_for_bit(seed, n):
    """The batched transfer prunes leaves per block of coordinate-sorted queries (`grid._candidates`): on a 360-leaf
    lattice with holes, queries far outside it and on its power-of-two lines (distance ties at the k-th leaf), in
    more queries than one block holds, every answer equals the one-query path's, which measures every leaf."""
    rng = np.random.default_rng(seed)
    sol = lambda q: float(_roofline(q["h"], q["s"], q["b"]))  # noqa: E731
    keys = [(h, s, b) for h in (4, 8, 16, 32, 64) for s in 2 ** np.arange(6, 15) for b in 2 ** np.arange(8)]
    utils = rng.choice([0.0, 0.25, 0.5, 0.7, 1.0], size=len(keys))
    rows = [(k, sol(dict(zip("hsb", k, strict=True))) / u) for k, u in zip(keys, utils, strict=True) if u > 0]
    assume(rows)
    queries = np.column_stack([2.0 ** rng.integers(0, 9, n), 2.0 ** rng.integers(2, 18, n), 2.0 ** rng.integers(0, 11, n)])
    jitter = rng.random(n) < 0.5
    queries[jitter] = np.maximum(np.round(queries[jitter] * rng.uniform(0.5, 3.0, (jitter.sum(), 3))), 1.0)
    build = lambda: coordinate_grid(("h", "s", "b"), rows, sol, sqrt_axes=("s",))  # noqa: E731
    values, moved = evaluate_many(build(), {a: queries[:, i] for i, a in enumerate("hsb")},
                                  lambda c: _roofline(c["h"], c["s"], c["b"]))
    assume(moved.any())
    g = build()
    for q, got, got_moved in zip(queries, values, moved, strict=True):
        want, want_moved = evaluate(g, dict(zip("hsb", q.tolist(), strict=True)))
        # None / NaN: the k + 1 nearest all equidistant (every weight 0), a miss on both paths
        assert (np.isnan(got) if want is None else want == got) and want_moved == got_moved, q

ATTN_SLICES = [("h200_sxm", "trtllm", "1.3.0rc20"), ("b200_sxm", "trtllm", "1.3.0rc20"), ("h100_sxm", "sglang", "0.5.14"),
               ("l40s", "vllm", "0.24.0")]
SLICE_KEYS = ["attn_dtype", "kv_cache_dtype", "head_dim", "window_size", "num_key_value_heads"]


def in_data(est, key: dict, heads: int, isl: int, batch: int) -> bool:
    """Whether the pool serving this query (MHA when heads == kv_heads, else GQA) answers it in-data."""
    from perfledger.estimator.errors import NoDataError
    from perfledger.estimator.fit.grid import interpolate
    from perfledger.estimator.ops.attention.context import ContextAttentionModel

    try:
        grid = ContextAttentionModel()._grid(est, {**key, "qk_norm": False, "lane_defaults": False}, heads == key["kv_heads"])
    except NoDataError:
        return False
    return interpolate(grid, {"num_heads": heads, "isl": isl, "batch_size": batch}) is not None


def _ours(est, row: dict, mode: str = "silicon"):
    from perfledger.estimator.errors import EstimatorError

    try:
        return estimate(est, "attention", pl.DataFrame({k: [v] for k, v in row.items()}), mode=mode).item(0, "latency_ms")
    except EstimatorError:
        return None


@pytest.mark.aic
@pytest.mark.parametrize("system,backend,version", ATTN_SLICES)
def test_context_attention_matches_reference(wheel_est, oracle, system, backend, version):
    """In-data SILICON (exact, interpolated, ragged bracket) and SOL, with and without qk-norm, within 1e-6.

    GQA shapes only (heads a multiple of kv_heads); out-of-data queries: test_attention_transfer.py.
    """
    rng = np.random.default_rng(zlib.crc32(f"{system}/{backend}".encode()))
    worst, inside = 0.0, 0
    for key, seen in sampled_slices(wheel_est, system, backend, version, "attention", rng, 12):
        for _ in range(10):
            heads = int(rng.choice(seen)) if rng.random() < 0.6 else int(key["kv_heads"] * rng.integers(1, 9))
            isl = int(rng.choice([1, 16, 1024, 3000, 16384])) if rng.random() < 0.4 else int(rng.integers(2, 16384))
            batch, qk = int(rng.choice([1, 3, 8, 64, 200])), bool(rng.random() < 0.5)
            row = {**key, "heads": heads, "isl": isl, "batch": batch, "qk_norm": qk}
            args = (system, backend, version, key["fmha_quant"], key["kv_quant"], key["head_dim"], key["window"],
                    key["kv_heads"], heads, isl, batch, qk)
            sol, ref_sol = _ours(wheel_est, row, "sol"), oracle.context_attention(*args, mode="SOL")
            worst = max(worst, abs(sol - ref_sol) / ref_sol)
            if not in_data(wheel_est, key, heads, isl, batch):
                continue
            ours, ref = _ours(wheel_est, row), oracle.context_attention(*args)
            assert ref is not None, f"reference misses an in-data query {row}"
            worst, inside = max(worst, abs(ours - ref) / ref), inside + 1
    assert worst <= 1e-6 and inside >= 30, (worst, inside)


def gen_in_data(est, key: dict, heads: int, batch: int, seq: int) -> bool:
    """Whether all 5 kv samples of a decode query fall inside the serving pool's collected grid."""
    from perfledger.estimator.errors import NoDataError
    from perfledger.estimator.fit.grid import interpolate
    from perfledger.estimator.ops.attention.generation import GenerationAttentionModel, kv_samples

    try:
        grid = GenerationAttentionModel()._grid(est, {**key, "lane_defaults": False}, heads == key["kv_heads"])
    except NoDataError:
        return False
    return all(interpolate(grid, {"num_heads": heads, "batch_size": batch, "seq": int(kv) + 1}) is not None
               for kv in kv_samples(seq))


GEN_KEYS = ["kv_cache_dtype", "head_dim", "window_size", "num_key_value_heads"]


def sampled_slices(est, system, backend, version, op: str, rng, count: int, kv_quants=None):
    """Up to `count` random slices of the op's attention table: (query key, the slice's collected head counts)."""
    table_name, keys = ("context_attention_perf", SLICE_KEYS) if op == "attention" else ("generation_attention_perf", GEN_KEYS)
    table = est.table(system, backend, version, table_name, shared=True)
    slices = table.select(keys).unique().sort(keys)
    if kv_quants is not None:
        slices = slices.filter(pl.col("kv_cache_dtype").is_in(list(kv_quants)))
    for j in rng.choice(slices.height, min(count, slices.height), replace=False):
        r = slices.row(int(j), named=True)
        key = dict(system=system, backend=backend, version=version, kv_quant=r["kv_cache_dtype"], head_dim=r["head_dim"],
                   window=r["window_size"], kv_heads=r["num_key_value_heads"])
        if op == "attention":
            key["fmha_quant"] = r["attn_dtype"]
        yield key, table.filter(**{k: r[k] for k in keys})["num_heads"].unique().to_list()


@pytest.mark.aic
@pytest.mark.parametrize("system,backend,version", ATTN_SLICES)
def test_generation_attention_matches_reference(wheel_est, oracle, system, backend, version):
    """The 5-sample kv rule over in-data Grid answers (exact and interpolated heads/batch/seq), within 1e-6."""
    rng = np.random.default_rng(zlib.crc32(f"gen/{system}/{backend}".encode()))
    worst, inside = 0.0, 0
    for key, seen in sampled_slices(wheel_est, system, backend, version, "generation_attention", rng, 10,
                                    kv_quants=oracle.common.KVCacheQuantMode.__members__):
        for _ in range(10):
            heads = int(rng.choice(seen)) if rng.random() < 0.6 else int(key["kv_heads"] * rng.integers(1, 9))
            batch, seq = int(rng.choice([1, 3, 8, 64, 200])), int(np.exp(rng.uniform(np.log(3), np.log(60000))))
            if not gen_in_data(wheel_est, key, heads, batch, seq):
                continue
            frame = pl.DataFrame({k: [v] for k, v in {**key, "heads": heads, "batch": batch, "seq": seq}.items()})
            ours = estimate(wheel_est, "generation_attention", frame).item(0, "latency_ms")
            ref = oracle.generation_attention(system, backend, version, key["kv_quant"], key["head_dim"], key["window"],
                                              key["kv_heads"], heads, batch, seq)
            assert ref is not None, f"reference misses an in-data query {key} h={heads} b={batch} s={seq}"
            worst, inside = max(worst, abs(ours - ref) / ref), inside + 1
    assert worst <= 1e-6 and inside >= 30, (worst, inside)
