"""KDA kernels (kda_perf): bilinear (batch, seq_len) grid for context, batch curve for decode, cross-backend
rows and the roofline for kernels without rows; parity with 0.12.0, typed misses outside the grid."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import NoDataError
from perfledger.versions import earlier_versions

H200 = ("h200_sxm", "vllm", "0.24.0")
KERNELS = [("causal_conv1d_fn_qkv3", "context"), ("flashkda_fwd", "context"), ("fused_kda_decode", "generation"),
           ("causal_conv1d_update", "generation")]


def frame(system, backend, version, kernel, phase, heads, batch, seq):
    n = len(batch)
    return pl.DataFrame({"system": [system] * n, "backend": [backend] * n, "version": [version] * n,
                         "kernel": [kernel] * n, "phase": [phase] * n, "heads": [heads] * n, "batch": batch, "seq": seq})


def test_dev_versions_are_earlier_pep440_releases():
    """vllm kda rows live under 0.1.dev19262; 0.24.0 reaches them as an earlier version, as 0.12.0 does."""
    assert earlier_versions("0.24.0", ["0.1.dev19262", "0.25.0"]) == ["0.1.dev19262"]
    assert earlier_versions("0.1.0", ["0.1.dev19262"]) == ["0.1.dev19262"]


def test_exact_rows_and_midpoints(wheel_est):
    rows = wheel_est.table(*H200, "kda_perf", shared=True).filter(
        (pl.col("kernel_source") == "flashkda_fwd") & (pl.col("num_k_heads") == 12) & (pl.col("batch_size") <= 4)
        & (pl.col("seq_len").is_in([2048, 4096])))
    lat = {(b, s): v for b, s, v in rows.select("batch_size", "seq_len", "latency").iter_rows()}
    out = estimate(wheel_est, "kda_kernel", frame(*H200, "flashkda_fwd", "context", 12, [2, 3, 2], [2048, 3072, 4096]))
    assert out["latency_ms"][0] == lat[(2, 2048)] and out["latency_ms"][2] == lat[(2, 4096)]
    mid = (lat[(2, 2048)] + lat[(2, 4096)] + lat[(4, 2048)] + lat[(4, 4096)]) / 4
    assert out["latency_ms"][1] == pytest.approx(mid, rel=1e-12)
    assert out["source"].to_list() == ["silicon"] * 3 and (out["sol_ms"] < out["latency_ms"]).all()


def test_uncollected_heads_read_the_nearest_count_in_silicon_labelled_xshape(wheel_est):
    """16 and 18 heads read the 12-head grid (nearest, ties to the smaller), 20 the 24-head one, 1 the smallest and 200
    the largest collected count, unscaled, in SILICON as 0.12.0 does; labelled xshape, a collected count silicon."""
    out = estimate(wheel_est, "kda_kernel", frame(*H200, "flashkda_fwd", "context", 12, [2, 2, 2], [2048] * 3)
                   .with_columns(heads=pl.Series([12, 24, 96])))
    assert out["source"].to_list() == ["silicon"] * 3
    at = dict(zip((12, 24, 96), out["latency_ms"].to_list(), strict=True))
    for mode in ("silicon", "hybrid"):
        for heads, read in ((16, 12), (18, 12), (20, 24), (1, 12), (6, 12), (200, 96)):
            got = estimate(wheel_est, "kda_kernel", frame(*H200, "flashkda_fwd", "context", heads, [2], [2048]), mode=mode)
            assert (got["latency_ms"][0], got["source"][0]) == (at[read], "xshape"), (mode, heads)
    # an uncollected head dim / conv width reads the collected structure (128 / 4), unscaled, in SILICON
    for col, value in (("head_dim", 64), ("head_dim", 256), ("d_conv", 3)):
        got = estimate(wheel_est, "kda_kernel", frame(*H200, "flashkda_fwd", "context", 12, [2], [2048])
                       .with_columns(pl.lit(value).alias(col)))
        assert (got["latency_ms"][0], got["source"][0]) == (at[12], "silicon"), (col, value)
    with pytest.raises(NoDataError, match="phase 'verify' is not priced"):
        estimate(wheel_est, "kda_kernel", frame(*H200, "flashkda_fwd", "verify", 12, [2], [2048]))
    for mode in ("silicon", "sol"):
        with pytest.raises(NoDataError, match="no rows for kernel no_such_kernel .*no context roofline for kernel 'no_such"):
            estimate(wheel_est, "kda_kernel", frame(*H200, "no_such_kernel", "context", 12, [2], [2048]), mode=mode)


def test_every_mode_prices_alike_but_for_the_shared_layer(wheel_est):
    """EMPIRICAL and SOL read the own version's rows as SILICON does (0.12.0's handles do); the shared layer (earlier
    versions, lenders) is SILICON / HYBRID only, so vLLM 0.24.0, whose kda rows are 0.1.dev19262's, gets the roofline."""
    sglang = frame("h200_sxm", "sglang", "0.5.16", "chunk_kda", "context", 6, [3, 3], [1500, 1500]) \
        .with_columns(heads=pl.Series([12, 6]))
    silicon = estimate(wheel_est, "kda_kernel", sglang)
    assert silicon["source"].to_list() == ["silicon", "xshape"] and silicon["latency_ms"][0] == silicon["latency_ms"][1]
    for mode in ("empirical", "sol"):
        assert estimate(wheel_est, "kda_kernel", sglang, mode=mode).select("latency_ms", "source").equals(
            silicon.select("latency_ms", "source")), mode
        vllm = estimate(wheel_est, "kda_kernel", frame(*H200, "flashkda_fwd", "context", 6, [3], [1500]), mode=mode)
        assert (vllm["latency_ms"][0], vllm["source"][0]) == (vllm["sol_ms"][0], "sol"), mode


def expected_tier(est, cell, kernel, phase, heads, ref_tier, collected_structure=True):
    """0.12.0's tier, but `xshape` where its silicon answer is read off another head count: the kernel (or, where
    kda.yaml routes it -- only at the collected head dims / conv width -- the fused kernel covering the shard) has no
    rows at the query's."""
    from perfledger.estimator.ops.kda import kda_catalog

    rows = est.table(*cell, "kda_perf", shared=True).filter(pl.col("phase") == phase, pl.col("d_model") == 7168)

    def collected(k):
        return heads in rows.filter(pl.col("kernel_source") == k)["num_k_heads"].to_list()

    route = (kda_catalog()["fused_routes"].get(phase) or {}).get(kernel)
    at_shard = collected(kernel) or (route is not None and collected_structure and collected(route["via"]))
    return "xshape" if ref_tier == "silicon" and not at_shard else ref_tier


CELLS = [H200, ("b200_sxm", "sglang", "0.5.16"), ("l40s", "sglang", "0.5.16")]


@pytest.mark.aic
@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("kernel,phase", KERNELS + [("chunk_kda", "context"), ("fused_recurrent_kda_packed_decode",
                                                                               "generation")])
def test_kda_matches_reference_in_and_out_of_the_grid(wheel_est, oracle, cell, kernel, phase):
    """Random batch/seq inside, between holes and beyond the grid, collected and uncollected head counts (and on
    sglang 0.5.16 the 12-head decode shards 0.12.0 routes through kda_fused_decode): value and tier agree (ours
    `xshape` where 0.12.0's silicon answer is read off another head count)."""
    from aiconfigurator_core.sdk.operations import KDAKernel

    rng = np.random.default_rng(len(kernel) + len(cell[0]))
    handle = oracle.handle(*cell)
    head_counts = [12, 24, 48, 96, 12, 96, *rng.integers(1, 200, 6)]
    batches = np.exp(rng.uniform(0, np.log(600 if phase == "context" else 5000), 12))
    seqs = np.exp(rng.uniform(0, np.log(100000), 12))
    points = [(int(h), int(b), int(s) if phase == "context" else 1) for h, b, s in zip(head_counts, batches, seqs, strict=True)]
    points += [(12, 64, 20000)] if phase == "context" else []
    for nk, b, s in points:
        op = KDAKernel("k", 1.0, kernel, phase, 7168, nk, 128, nk, 128, 4)
        ref = handle.evaluate_ops_json(oracle.build([op]), is_context=phase == "context", batch_size=b, s=s,
                                       x=b * s if phase == "context" else b)[0]
        out = estimate(wheel_est, "kda_kernel", frame(*cell, kernel, phase, nk, [b], [s]))
        tier = expected_tier(wheel_est, cell, kernel, phase, nk, ref[3])
        assert (out["latency_ms"][0], out["source"][0]) == (pytest.approx(ref[1], rel=1e-9, abs=1e-15), tier), (nk, b, s)


# Bytes 0.12.0's KDA roofline charges (its latency × l40s mem_bw 864 GB/s), per (kernel, phase, heads, head_k,
# head_v, d_conv, batch, seq): the recurrent state is re-read once per started 64-token chunk.
ROOFLINE_BYTES = [
    ("chunk_kda", "context", 1, 128, 128, 4, 1, 63, 211712), ("chunk_kda", "context", 1, 128, 128, 4, 1, 64, 344064),
    ("chunk_kda", "context", 1, 128, 128, 4, 1, 32768, 109182976), ("flashkda_fwd", "context", 1, 128, 128, 4, 1, 100, 390144),
    ("causal_conv1d_update", "generation", 1, 128, 128, 8, 1, 1, 7680),
    ("fused_recurrent_kda_packed_decode", "generation", 12, 128, 128, 4, 8, 1, 12705792),
    ("kda_fused_decode", "generation", 2, 128, 64, 4, 3, 1, 410880),
]


@pytest.mark.parametrize("kernel,phase,heads,hk,hv,dc,batch,seq,nbytes", ROOFLINE_BYTES)
def test_kda_roofline_bytes(kernel, phase, heads, hk, hv, dc, batch, seq, nbytes):
    from perfledger.estimator.fit.roofline import kda_sol
    from perfledger.estimator.ops.kda import kda_catalog

    cat = kda_catalog()
    ms = kda_sol(cat["forms"][phase][kernel], batch, seq, heads, hk, hv, dc, cat["chunk"], 1e9)[0]
    assert float(ms) * 1e6 == pytest.approx(nbytes, rel=1e-12)


@given(b=st.integers(1, 512), s=st.integers(1, 70000), n=st.integers(1, 96), k=st.integers(1, 4))
def test_kda_roofline_is_linear_in_batch_and_heads_and_grows_with_seq(b, s, n, k):
    from perfledger.estimator.fit.roofline import kda_sol

    one = float(kda_sol(["recurrent", "conv"], b, s, n, 128, 128, 4, 64, 1e12)[0])
    assert float(kda_sol(["recurrent", "conv"], b * k, s, n * k, 128, 128, 4, 64, 1e12)[0]) == pytest.approx(one * k * k)
    assert float(kda_sol(["recurrent", "conv"], b, s + 1, n, 128, 128, 4, 64, 1e12)[0]) > one


@pytest.mark.aic
@pytest.mark.parametrize("system,backend,version,d_model", [
    ("l40s", "sglang", "0.5.14", 4096), ("h200_sxm", "sglang", "0.5.14", 4096), ("b200_sxm", "sglang", "0.5.14", 4096),
    ("h200_sxm", "trtllm", "1.3.0rc20", 7168)])
def test_kda_roofline_matches_reference(wheel_est, oracle, system, backend, version, d_model):
    """No kda rows at d_model 4096 anywhere, nor any kda table on trtllm: both sides answer every kda.yaml kernel
    by its roofline (tier sol) inside SILICON."""
    from aiconfigurator_core.sdk.operations import KDAKernel

    from perfledger.estimator.ops.kda import kda_catalog

    rng = np.random.default_rng(7)
    handle = oracle.handle(system, backend, version)
    compared = 0
    for phase, kernels in kda_catalog()["forms"].items():
        for kernel in kernels:
            heads, batch, seq = int(rng.choice([1, 6, 12, 48])), int(rng.integers(1, 300)), int(rng.integers(1, 20000))
            seq = seq if phase == "context" else 1
            op = KDAKernel("k", 1.0, kernel, phase, d_model, heads, 128, heads, 128, 4)
            ref = handle.evaluate_ops_json(oracle.build([op]), is_context=phase == "context", batch_size=batch, s=seq,
                                           x=batch * seq)[0]
            q = frame(system, backend, version, kernel, phase, heads, [batch], [seq]).with_columns(d_model=pl.lit(d_model))
            out = estimate(wheel_est, "kda_kernel", q)
            assert (out["latency_ms"][0], out["source"][0]) == (pytest.approx(ref[1], rel=1e-9), ref[3]), (phase, kernel)
            compared += 1
    assert compared == sum(len(k) for k in kda_catalog()["forms"].values())


@pytest.mark.aic
@pytest.mark.parametrize("system", ["l40s", "h200_sxm"])
def test_sglang_conv1d_reads_the_vllm_rows_as_the_reference_does(wheel_est, oracle, system):
    """sglang 0.5.14 has no kda rows (its own start at 0.5.16, a later version): the reuse manifest lends vLLM's
    causal_conv1d_fn_qkv3 rows, and only those (chunk_kda stays on the roofline)."""
    from aiconfigurator_core.sdk.operations import KDAKernel

    rng = np.random.default_rng(3)
    handle = oracle.handle(system, "sglang", "0.5.14")
    compared = 0
    for nk in (12, 24, 48, 96):
        op = KDAKernel("k", 1.0, "causal_conv1d_fn_qkv3", "context", 7168, nk, 128, nk, 128, 4)
        for b, s in zip(rng.integers(1, 33, 6), rng.integers(16, 8192, 6), strict=True):
            q = frame(system, "sglang", "0.5.14", "causal_conv1d_fn_qkv3", "context", nk, [int(b)], [int(s)])
            try:  # grid holes at large heads x batch x seq: a miss here, answered by 0.12.0 (Known gaps)
                out = estimate(wheel_est, "kda_kernel", q)
            except NoDataError:
                continue
            ref = handle.evaluate_ops_json(oracle.build([op]), is_context=True, batch_size=int(b), s=int(s),
                                           x=int(b * s))[0]
            assert (out["latency_ms"][0], out["source"][0]) == (pytest.approx(ref[1], rel=1e-9), ref[3]), (nk, b, s)
            compared += 1
    assert compared >= 12


def test_an_exact_row_beside_a_grid_hole_answers(wheel_est):
    """h200 vllm flashkda 12 heads has no (64, 32768) row: the (64, 16384) row still answers exactly."""
    rows = wheel_est.table(*H200, "kda_perf", shared=True).filter(
        (pl.col("kernel_source") == "flashkda_fwd") & (pl.col("num_k_heads") == 12) & (pl.col("batch_size") == 64))
    lat = dict(rows.select("seq_len", "latency").iter_rows())
    assert 32768 not in lat and 16384 in lat
    out = estimate(wheel_est, "kda_kernel", frame(*H200, "flashkda_fwd", "context", 12, [64], [16384]))
    assert out["latency_ms"][0] == lat[16384]



STRUCTURE_CELLS = [H200, ("b200_sxm", "sglang", "0.5.16"), ("l40s", "sglang", "0.5.14")]


@pytest.mark.aic
@pytest.mark.parametrize("cell", STRUCTURE_CELLS)
def test_kda_uncollected_head_dims_and_conv_widths_match_reference(wheel_est, oracle, cell):
    """Head dims 32–256 and conv widths 2–6 the tables never hold read the nearest collected structure (0.12.0 does
    so inside SILICON); beyond the grid too; 0.5.16's fused decode route only at the collected structure. Values
    and tiers agree (an uncollected head count at once: ours labelled xshape)."""
    from aiconfigurator_core.sdk.operations import KDAKernel

    rng = np.random.default_rng(len(cell[0]))
    kernels = [("flashkda_fwd", "context"), ("chunk_kda", "context"), ("causal_conv1d_fn_qkv3", "context"),
               ("fused_kda_decode", "generation"), ("causal_conv1d_update", "generation"),
               ("fused_recurrent_kda_packed_decode", "generation")]
    handle, answered = oracle.handle(*cell), 0
    for kernel, phase in kernels:
        for _ in range(6):
            nk, hd, dc = int(rng.choice([12, 24, 48, 96])), int(rng.choice([32, 64, 96, 192, 256])), int(rng.choice([2, 3, 4, 6]))
            b = int(np.exp(rng.uniform(0, np.log(600 if phase == "context" else 5000))))
            s = int(np.exp(rng.uniform(0, np.log(100000)))) if phase == "context" else 1
            op = KDAKernel("k", 1.0, kernel, phase, 7168, nk, hd, nk, hd, dc)
            ref = handle.evaluate_ops_json(oracle.build([op]), is_context=phase == "context", batch_size=b, s=s,
                                           x=b * s if phase == "context" else b)[0]
            q = frame(*cell, kernel, phase, nk, [b], [s]).with_columns(head_dim=pl.lit(hd), d_conv=pl.lit(dc))
            out = estimate(wheel_est, "kda_kernel", q)
            tier = expected_tier(wheel_est, cell, kernel, phase, nk, ref[3], (hd, dc) == (128, 4))
            assert (out["latency_ms"][0], out["source"][0]) == (pytest.approx(ref[1], rel=1e-9, abs=1e-15), tier), \
                (kernel, nk, hd, dc, b, s)
            answered += 1
    assert answered == 36


# K3's tp16 shard per backend plan kernel, and the head count it reads: the nearest collected (sglang's decode pair
# holds 24 / 48 / 96 only, its 12-head shards run kda_fused_decode, which kda.yaml routes only at a collected count)
K3_TP16 = [(("h200_sxm", "vllm", "0.24.0"), [("causal_conv1d_fn_qkv3", "context", 12), ("flashkda_fwd", "context", 12),
                                              ("fused_kda_decode", "generation", 12)]),
           (("h200_sxm", "sglang", "0.5.16"), [("causal_conv1d_fn_qkv3", "context", 12), ("chunk_kda", "context", 12),
                                               ("causal_conv1d_update", "generation", 24),
                                               ("fused_recurrent_kda_packed_decode", "generation", 24)])]


@pytest.mark.aic
@pytest.mark.parametrize("cell,kernels", K3_TP16, ids=["/".join(c) for c, _ in K3_TP16])
def test_k3_tp16_shard_reads_the_nearest_head_count_as_the_reference(wheel_est, oracle, cell, kernels):
    """K3's tp16 shard (96 / 16 = 6 heads, collected nowhere): 0.12.0 reads the nearest collected count inside
    SILICON, and so do we, labelled xshape; the same in every mode (EMPIRICAL / SOL: own rows only, so vLLM 0.24.0,
    whose rows are an earlier version's, gets the roofline, tier sol)."""
    from aiconfigurator_core.sdk.operations import KDAKernel

    for mode in ("SILICON", "HYBRID", "EMPIRICAL", "SOL"):
        handle = oracle.get_view(*cell, database_mode=mode) if mode != "SILICON" else oracle.get_database(*cell)
        handle = oracle.EngineHandle.for_database(handle)
        for kernel, phase, read in kernels:
            for b, s in ((1, 4000), (8, 4000), (37, 900)) if phase == "context" else ((1, 1), (64, 1), (300, 1)):
                ref = handle.evaluate_ops_json(oracle.build([KDAKernel("k", 1.0, kernel, phase, 7168, 6, 128, 6, 128, 4)]),
                                               is_context=phase == "context", batch_size=b, s=s, x=b * s)[0]
                out = estimate(wheel_est, "kda_kernel", frame(*cell, kernel, phase, 6, [b], [s]), mode=mode.lower())
                tier = {"silicon": "xshape"}.get(ref[3], ref[3])
                assert (out["latency_ms"][0], out["source"][0]) == (pytest.approx(ref[1], rel=1e-9), tier), \
                    (mode, kernel, b, s)
                if tier == "xshape":  # the nearest count's own answer, unscaled
                    at = estimate(wheel_est, "kda_kernel", frame(*cell, kernel, phase, read, [b], [s]), mode=mode.lower())
                    assert (at["latency_ms"][0], at["source"][0]) == (out["latency_ms"][0], "silicon"), (mode, kernel)
