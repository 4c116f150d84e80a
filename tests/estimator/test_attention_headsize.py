"""Attention head-size transfer (EMPIRICAL / HYBRID) against the reference, and its ratio table.

A pool without samples at the query's head size borrows a reference head size's util (label xshape):
128 when the lane serving the query window holds it for that pool, else that lane's nearest size in log2;
lookup order (own, window), (ref, window), then both at window 0; context util × ratio(query) / ratio(ref)
per backend (estimator/ops/attention/attention_headsize.yaml), generation unscaled. Generated queries draw head sizes
mostly absent from the table (32 … 1024), windows from the table plus 0, kv heads from the table; both
sides must miss together or agree within 1e-6 relative with the same label, SILICON included.
"""

from __future__ import annotations

import zlib

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfledger.estimator.batch import estimate
from perfledger.estimator.ops.attention.head_size import head_ratio, headsize_doc
from tests.estimator.test_attention_empirical import (
    _ours,
    _ref_context,
    _ref_generation,
)

SYSTEMS = [("h200_sxm", "trtllm", "1.3.0rc20"), ("h100_sxm", "sglang", "0.5.14"), ("l40s", "vllm", "0.24.0")]
HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 512, 768, 1024)


def _queries(est, system, backend, version, op: str, rng, count: int):
    table = est.table(system, backend, version, "context_attention_perf" if op == "attention" else "generation_attention_perf",
                      shared=True)
    quant_columns = ("attn_dtype", "kv_cache_dtype") if op == "attention" else ("kv_cache_dtype",)
    quants = table.select(*quant_columns).unique().sort(pl.all()).rows(named=True)
    windows = sorted({0, *table["window_size"].unique().to_list()})
    kvs = sorted(table["num_key_value_heads"].unique().to_list())
    for _ in range(count):
        quant = quants[int(rng.integers(len(quants)))]
        kv = int(rng.choice(kvs[:6]))
        row = {"system": system, "backend": backend, "version": version, "kv_quant": quant["kv_cache_dtype"],
                   "head_dim": int(rng.choice(HEAD_SIZES)), "window": int(rng.choice(windows)), "kv_heads": kv,
                   "heads": kv * int(rng.choice([1, 1, 2, 4, 8])), "batch": int(rng.choice([1, 2, 8, 64, 256]))}
        if op == "attention":
            yield {**row, "fmha_quant": quant["attn_dtype"], "isl": int(rng.integers(2, 30000)),
                   "qk_norm": bool(rng.random() < 0.3)}
        else:
            yield {**row, "seq": int(np.exp(rng.uniform(np.log(2), np.log(200000))))}


@pytest.mark.aic
@pytest.mark.parametrize("op", ["attention", "generation_attention"])
@pytest.mark.parametrize("system,backend,version", SYSTEMS)
def test_head_size_transfer_matches_reference(wheel_est, oracle, system, backend, version, op):
    rng = np.random.default_rng(zlib.crc32(f"attn-headsize/{op}/{system}".encode()))
    ref_fn = _ref_context if op == "attention" else _ref_generation
    counts, worst = {"xshape": 0, "answered": 0, "both_miss": 0}, 0.0
    for i, row in enumerate(_queries(wheel_est, system, backend, version, op, rng, 40)):
        for mode in ("silicon", "hybrid", "empirical") if i % 4 == 0 else ("hybrid", "empirical"):
            ours, label = _ours(wheel_est, op, row, mode)
            ref = ref_fn(oracle, row, mode)
            assert (ours is None) == (ref is None), f"one side misses ({mode}): ours={ours} ref={ref} {row}"
            if ref is None:
                counts["both_miss"] += 1
                continue
            ref_label = oracle.handle(system, backend, version, mode.upper()).last_provenance() or "silicon"
            assert label == ref_label, (mode, row, label, ref_label)
            worst = max(worst, abs(ours - ref) / ref)
            counts["answered"] += 1
            counts["xshape"] += label == "xshape"
    assert worst <= 1e-6, worst
    assert counts["xshape"] >= 20 and counts["answered"] >= 40, counts


PINNED = [  # (system, backend, version, fmha, kv, head_dim, window, kv_heads, heads, borrowed label)
    # no 128 at window 128: 128 at window 0
    ("h200_sxm", "trtllm", "1.3.0rc20", "bfloat16", "bfloat16", 96, 128, 4, 16, "xshape"),
    # 128 at the window before own size at 0
    ("h200_sxm", "trtllm", "1.3.0rc20", "bfloat16", "bfloat16", 256, 8192, 4, 16, "xshape"),
    # window 128 lacks 128: own size at 0
    ("h200_sxm", "trtllm", "1.3.0rc20", "bfloat16", "bfloat16", 256, 128, 4, 16, "empirical"),
    # window 1024 only in the triton lane: 256
    ("h100_sxm", "sglang", "0.5.14", "bfloat16", "bfloat16", 128, 1024, 4, 16, "xshape"),
    # window 0 re-resolves the lane: fa3's 128
    ("h100_sxm", "sglang", "0.5.14", "bfloat16", "bfloat16", 384, 1024, 1, 4, "xshape"),
    # lane sizes {256, 512}: nearest 512
    ("h100_sxm", "sglang", "0.5.14", "bfloat16", "fp8", 384, 0, 1, 2, "xshape"),
    # nearest 256 has no window-0 rows: a miss
    ("h100_sxm", "sglang", "0.5.14", "bfloat16", "fp8", 352, 0, 1, 2, None),
    # lane holds 128: own size at window 0
    ("l40s", "vllm", "0.24.0", "bfloat16", "bfloat16", 128, 1024, 4, 16, "empirical"),
    # first lane by name: flashinfer decode rows
    ("l40s", "vllm", "0.24.0", "bfloat16", "fp8", 96, 0, 2, 8, "xshape"),
    # no transfer across quants: an absent quant misses
    ("l40s", "vllm", "0.24.0", "fp8", "fp8", 96, 0, 4, 16, None),
]


@pytest.mark.aic
@pytest.mark.parametrize("system,backend,version,fmha,kv,head_dim,window,kv_heads,heads,expected", PINNED)
def test_pinned_borrow_order_and_lane(wheel_est, oracle, system, backend, version, fmha, kv, head_dim, window, kv_heads, heads,
                                      expected):
    row = {"system": system, "backend": backend, "version": version, "fmha_quant": fmha, "kv_quant": kv, "head_dim": head_dim,
           "window": window, "kv_heads": kv_heads, "heads": heads, "isl": 3000, "batch": 2, "qk_norm": False}
    ours, label = _ours(wheel_est, "attention", row, "empirical")
    ref = _ref_context(oracle, row, "empirical")
    assert label == expected and (ref is None) == (ours is None)
    if ref is not None:
        assert oracle.handle(system, backend, version, "EMPIRICAL").last_provenance() == expected
        assert abs(ours - ref) <= 1e-6 * ref


@pytest.mark.aic
@pytest.mark.parametrize("system,backend,version", SYSTEMS)
def test_qk_norm_sol_column_equals_reference_in_every_mode(wheel_est, oracle, system, backend, version):
    """0.12.0's SOL of a qk_norm context query holds the q/k norm SOL terms in every mode (its latency does not)."""
    from aiconfigurator_core import _aiconfigurator_core as core

    for head_dim, window in ((128, 0), (96, 0), (128, 8192)):
        row = {"system": system, "backend": backend, "version": version, "fmha_quant": "bfloat16", "kv_quant": "bfloat16",
               "head_dim": head_dim, "window": window, "kv_heads": 2, "heads": 8, "isl": 2000, "batch": 4, "qk_norm": True}
        op = core.ContextAttention("a", 1.0, 8, 2, oracle.common.KVCacheQuantMode["bfloat16"],
                                   oracle.common.FMHAQuantMode["bfloat16"],
                                   window_size=window, head_size=head_dim, use_qk_norm=True)
        for mode in ("hybrid", "empirical"):
            ref = oracle.handle(system, backend, version, mode.upper()).evaluate_ops_sol_json(
                oracle.build([op]), is_context=True, batch_size=4, s=2000, x=8000)[0][1]
            ours = estimate(wheel_est, "attention", pl.DataFrame({k: [v] for k, v in row.items()}), mode=mode).item(0, "sol_ms")
            no_norm = estimate(wheel_est, "attention", pl.DataFrame({k: [v] for k, v in {**row, "qk_norm": False}.items()}),
                               mode="sol").item(0, "sol_ms")
            assert ours == pytest.approx(ref, rel=1e-12) and ours > no_norm


def test_ratio_table_points_and_clamps():
    assert head_ratio("trtllm", 64) == pytest.approx(0.58) and head_ratio("vllm", 512) == pytest.approx(1.60)
    assert head_ratio("sglang", 16) == head_ratio("sglang", 64) and head_ratio("sglang", 4096) == head_ratio("sglang", 512)
    assert head_ratio("trtllm", 96) == pytest.approx(0.58 + np.log2(1.5) * 0.42, rel=1e-12)  # linear in log2, not in size


@given(st.sampled_from(["trtllm", "sglang", "vllm"]), st.integers(1, 4096), st.integers(1, 4096))
def test_ratio_is_monotone_and_bounded(backend, a, b):
    table = headsize_doc()["context_ratio"][backend]
    lo, hi = sorted((a, b))
    assert min(table.values()) <= head_ratio(backend, lo) <= head_ratio(backend, hi) <= max(table.values())


def test_unknown_backend_names_the_yaml():
    with pytest.raises(KeyError, match="attention_headsize.yaml: context_ratio has no table for backend 'tensorrt'"):
        head_ratio("tensorrt", 128)


@pytest.mark.parametrize("text,match", [
    ("preferred: 128\ncontext_ratio:\n  trtllm: {64: 0.58}\n",
     r"attention_headsize.yaml: context_ratio.trtllm needs >= 2 entries"),
    ("preferred: 128\ncontext_ratio:\n  sglang: {64: 0.6, 128: -1}\n",
     r"context_ratio.sglang needs >= 2 entries .* positive ratio"),
    ("context_ratio: {}\n", "attention_headsize.yaml: needs an integer `preferred`"),
])
def test_bad_yaml_names_the_file_and_key(tmp_path, text, match):
    bad = tmp_path / "attention_headsize.yaml"
    bad.write_text(text)
    with pytest.raises(ValueError, match=match):
        headsize_doc(bad)
