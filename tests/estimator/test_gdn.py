"""GDN kernels (gdn_perf, Qwen3.5 linear attention) and the Qwen3.5 static plan: exact-structure rows, cross-backend
lenders in SILICON / HYBRID only, the roofline elsewhere; per-op parity with 0.12.0 on every slice of the wheel that
holds gdn_perf, whole-model static parity on a few deployments."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import NoDataError
from tests.estimator.conftest import assert_static_matches_engine

KERNELS = [("causal_conv1d_fn", "context"), ("chunk_gated_delta_rule", "context"), ("causal_conv1d_update", "generation"),
           ("fused_sigmoid_gating_delta_rule_update", "generation")]
H200 = ("h200_sxm", "sglang", "0.5.14")


def frame(cell, kernel, phase, d_model, nk, nv, batch, seq, **extra):
    n = len(batch)
    cols = {"system": cell[0], "backend": cell[1], "version": cell[2], "kernel": kernel, "phase": phase,
            "d_model": d_model, "heads": nk, "v_heads": nv, **extra}
    return pl.DataFrame({**{k: [v] * n for k, v in cols.items()}, "batch": batch, "seq": seq})


def gdn_slices() -> list[tuple[str, str, str]]:
    """Every system/backend/version of the wheel holding gdn_perf (none without the wheel: the aic tests skip)."""
    try:
        import aiconfigurator_core
    except ImportError:
        return []
    data = Path(aiconfigurator_core.__file__).parent / "systems" / "data"
    return sorted((p.parts[-5], p.parts[-3], p.parts[-2]) for p in data.glob("*/linear_attention/*/*/gdn_perf.parquet"))


def test_exact_rows_grid_and_curve(wheel_est):
    """A collected (batch, seq) answers its row; a decode batch between two rows lerps; the tier is silicon."""
    rows = wheel_est.table(*H200, "gdn_perf", shared=False).filter(
        pl.col("d_model") == 2048, pl.col("num_k_heads") == 8, pl.col("num_v_heads") == 16)
    ctx = dict(rows.filter(pl.col("kernel_source") == "chunk_gated_delta_rule", pl.col("batch_size") == 4)
               .select("seq_len", "latency").iter_rows())
    dec = dict(rows.filter(pl.col("kernel_source") == "fused_recurrent_gated_delta_rule_packed_decode")
               .select("batch_size", "latency").iter_rows())
    out = estimate(wheel_est, "gdn_kernel", frame(H200, "chunk_gated_delta_rule", "context", 2048, 8, 16, [4], [1024]))
    assert (out["latency_ms"][0], out["source"][0]) == (ctx[1024], "silicon") and out["sol_ms"][0] < ctx[1024]
    out = estimate(wheel_est, "gdn_kernel", frame(H200, "fused_sigmoid_gating_delta_rule_update", "generation", 2048, 8,
                                                  16, [64, 96], [1, 1]))
    assert out["latency_ms"][0] == dec[64]
    assert out["latency_ms"][1] == pytest.approx((dec[64] + dec[128]) / 2, rel=1e-12)


def test_uncollected_structures_and_bf16_state_read_the_roofline(wheel_est):
    """No rows at the shard (heads 3/7, d_model 7168, head dim 64) or a bf16 state on a state kernel: tier sol in
    every mode; the conv kernel keeps its rows at a bf16 state (its rows do not depend on it)."""
    for kw in ({"heads": 3, "v_heads": 7}, {"d_model": 7168}, {"head_k_dim": 64}):
        q = frame(H200, "chunk_gated_delta_rule", "context", 2048, 8, 16, [4], [1024]).with_columns(
            *(pl.lit(v).alias(k) for k, v in kw.items()))
        for mode in ("silicon", "hybrid", "empirical", "sol"):
            out = estimate(wheel_est, "gdn_kernel", q, mode=mode)
            assert out["source"][0] == "sol" and out["latency_ms"][0] == out["sol_ms"][0], (kw, mode)
    bf16 = {"state_dtype": "bfloat16"}
    state = estimate(wheel_est, "gdn_kernel", frame(H200, "chunk_gated_delta_rule", "context", 2048, 8, 16, [4], [1024], **bf16))
    conv = estimate(wheel_est, "gdn_kernel", frame(H200, "causal_conv1d_fn", "context", 2048, 8, 16, [4], [1024], **bf16))
    assert (state["source"][0], conv["source"][0]) == ("sol", "silicon")
    with pytest.raises(NoDataError, match="no context kernel 'flashkda_fwd' in gdn.yaml"):
        estimate(wheel_est, "gdn_kernel", frame(H200, "flashkda_fwd", "context", 2048, 8, 16, [4], [1024]))


def test_cross_backend_rows_are_lent_in_silicon_and_hybrid_only(wheel_est):
    """trtllm collected 16 k-heads only: its 8-head shard reads sglang's conv rows (reuse manifest) in SILICON and
    HYBRID, the roofline in EMPIRICAL and SOL (0.12.0's shared layer is off there)."""
    trt = ("h200_sxm", "trtllm", "1.3.0rc20")
    own = estimate(wheel_est, "gdn_kernel", frame(H200, "causal_conv1d_fn", "context", 2048, 8, 16, [4], [1024]))
    q = frame(trt, "causal_conv1d_fn", "context", 2048, 8, 16, [4], [1024])
    for mode, tier in (("silicon", "silicon"), ("hybrid", "silicon"), ("empirical", "sol"), ("sol", "sol")):
        out = estimate(wheel_est, "gdn_kernel", q, mode=mode)
        assert out["source"][0] == tier, mode
        if tier == "silicon":
            assert out["latency_ms"][0] == own["latency_ms"][0]


@pytest.mark.aic
def test_one_physical_kernel_per_structure_as_the_reference(wheel_est, oracle):
    """vLLM on l40s runs the Triton scan; sglang / trtllm lend chunk_gated_delta_rule rows at the same shard. Only the
    own kernel's rows build the grid (a blend moved batch 26 × seq 5629 by 1.8 %, static_parity seed 1)."""
    from aiconfigurator_core.sdk.operations import GDNKernel

    cell = ("l40s", "vllm", "0.24.0")
    op = GDNKernel("k", 1.0, "chunk_gated_delta_rule", "context", 4096, 16, 128, 64, 128, 4, mamba_ssm_dtype="float32")
    for batch, seq in ((26, 5629), (26, 4096), (20, 6000)):
        ref = oracle.handle(*cell).evaluate_ops_json(oracle.build([op]), is_context=True, batch_size=batch, s=seq,
                                                     x=batch * seq)[0]
        out = estimate(wheel_est, "gdn_kernel", frame(cell, "chunk_gated_delta_rule", "context", 4096, 16, 64, [batch], [seq]))
        assert (out["latency_ms"][0], out["source"][0]) == (pytest.approx(ref[1], rel=1e-9), ref[3]), (batch, seq)


# Bytes 0.12.0's GDN roofline charges (its latency × l40s mem_bw 864 GB/s at d_model 7168, where no rows exist), per
# (kernel, phase, k heads, v heads, head_k, head_v, d_conv, batch, seq, state dtype)
ROOFLINE_BYTES = [
    ("causal_conv1d_fn", "context", 1, 1, 128, 128, 4, 1, 1, "float32", 4608),
    ("causal_conv1d_fn", "context", 1, 1, 128, 128, 8, 1, 1, "float32", 7680),
    ("causal_conv1d_fn", "context", 2, 4, 128, 128, 4, 3, 100, "float32", 3686400),
    ("chunk_gated_delta_rule", "context", 1, 1, 128, 128, 4, 1, 1, "float32", 132096),
    ("chunk_gated_delta_rule", "context", 1, 1, 128, 128, 4, 1, 64, "float32", 262144),
    ("chunk_gated_delta_rule", "context", 1, 1, 128, 128, 4, 1, 1000, "float32", 2138112),
    ("chunk_gated_delta_rule", "context", 1, 1, 64, 128, 4, 1, 1, "float32", 66304),
    ("chunk_gated_delta_rule", "context", 2, 4, 128, 128, 4, 3, 100, "float32", 3280896),
    ("causal_conv1d_update", "generation", 2, 4, 128, 128, 4, 3, 1, "float32", 36864),
    ("fused_sigmoid_gating_delta_rule_update", "generation", 2, 4, 128, 128, 4, 3, 1, "float32", 1582080),
]


@pytest.mark.parametrize("kernel,phase,nk,nv,hk,hv,dc,batch,seq,dtype,nbytes", ROOFLINE_BYTES)
def test_gdn_roofline_bytes(kernel, phase, nk, nv, hk, hv, dc, batch, seq, dtype, nbytes):
    from perfledger.estimator.fit.roofline import gdn_sol
    from perfledger.estimator.ops.gdn import gdn_catalog

    cat = gdn_catalog()
    ms = gdn_sol(cat["kernels"][phase][kernel]["forms"], batch, seq, nk, nv, hk, hv, dc, cat["chunk"],
                 cat["state_bytes"][dtype], 1e9)[0]
    assert float(ms) * 1e6 == pytest.approx(nbytes, rel=1e-12)


@given(b=st.integers(1, 512), s=st.integers(1, 70000), nk=st.integers(1, 32), k=st.integers(1, 4))
def test_gdn_roofline_is_linear_in_batch_and_heads_and_grows_with_seq(b, s, nk, k):
    from perfledger.estimator.fit.roofline import gdn_sol

    one = float(gdn_sol(["recurrent", "conv"], b, s, nk, 2 * nk, 128, 128, 4, 64, 4, 1e12)[0])
    assert float(gdn_sol(["recurrent", "conv"], b * k, s, nk * k, 2 * nk * k, 128, 128, 4, 64, 4, 1e12)[0]) \
        == pytest.approx(one * k * k)
    assert float(gdn_sol(["recurrent", "conv"], b, s + 1, nk, 2 * nk, 128, 128, 4, 64, 4, 1e12)[0]) > one
    assert float(gdn_sol(["recurrent"], b, s, nk, 2 * nk, 128, 128, 4, 64, 2, 1e12)[0]) \
        < float(gdn_sol(["recurrent"], b, s, nk, 2 * nk, 128, 128, 4, 64, 4, 1e12)[0])


@pytest.mark.aic
@pytest.mark.parametrize("cell", gdn_slices())
def test_gdn_matches_reference_on_every_slice(wheel_est, oracle, cell):
    """Two kernels per slice at a random shard (a Qwen3.5 one, one only lenders hold, one nobody holds), SILICON,
    HYBRID and SOL: value and tier agree with 0.12.0."""
    from aiconfigurator_core.sdk.operations import GDNKernel

    rng = np.random.default_rng(sum(map(ord, "".join(cell))))
    shards = [(2048, 8, 16), (4096, 4, 16), (3072, 16, 64), (5120, 3, 7)]
    first = gdn_slices().index(cell) % 2  # a prefill and a decode kernel per slice, all four across slices
    for i, (kernel, phase) in enumerate(KERNELS[first::2]):
        d_model, nk, nv = shards[(i + int(rng.integers(4))) % 4]
        batch = int(np.exp(rng.uniform(0, np.log(150 if phase == "context" else 2000))))
        seq = int(np.exp(rng.uniform(0, np.log(50000)))) if phase == "context" else 1
        op = GDNKernel("k", 1.0, kernel, phase, d_model, nk, 128, nv, 128, 4, mamba_ssm_dtype="float32")
        for mode in ("SILICON", "HYBRID", "SOL"):
            ref = oracle.handle(*cell, mode).evaluate_ops_json(oracle.build([op]), is_context=phase == "context",
                                                               batch_size=batch, s=seq, x=batch * seq)[0]
            out = estimate(wheel_est, "gdn_kernel", frame(cell, kernel, phase, d_model, nk, nv, [batch], [seq]),
                           mode=mode.lower())
            assert (out["latency_ms"][0], out["source"][0]) == (pytest.approx(ref[1], rel=1e-9, abs=1e-15), ref[3]), \
                (kernel, mode, d_model, nk, nv, batch, seq)


@pytest.mark.aic
@pytest.mark.parametrize("model,system,backend,version,par,shape", [
    ("Qwen/Qwen3.5-35B-A3B", "h200_sxm", "vllm", "0.24.0", (2, 1, 2), (4, 1000, 3)),  # free pre-dispatch, overlap
    ("Qwen/Qwen3.5-397B-A17B", "b200_sxm", "sglang", "0.5.14", (4, 1, 4), (2, 3000, 3)),  # fused shared gate
    ("Qwen/Qwen3.5-27B", "b200_sxm", "trtllm", "1.3.0rc20", (2, 1, 1), (8, 700, 3)),  # dense FFN
])
def test_qwen35_static_matches_the_engine(wheel_est, oracle, model, system, backend, version, par, shape):
    assert_static_matches_engine(wheel_est, oracle, model, system, backend, version, par, shape,
                                 {"gemm": "bfloat16", "moe": "bfloat16", "kv": "bfloat16"})


def test_gdn_heads_must_split_over_tp():
    """0.12.0 refuses a TP that does not divide the GDN head counts; so do we (a typed refusal, not an answer)."""
    from perfledger.estimator.errors import UnsupportedModelError
    from perfledger.estimator.models.config import resolve_model
    from perfledger.estimator.models.plans import qwen35
    from perfledger.estimator.models.plans.registry import load_model
    from perfledger.estimator.static import Deploy

    config = resolve_model("Qwen/Qwen3.5-35B-A3B")
    with pytest.raises(UnsupportedModelError, match="divisible by tp 3"):
        qwen35.check(load_model(config), Deploy("h200_sxm", "vllm", "0.24.0", tp=3), config)
