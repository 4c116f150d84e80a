"""Mamba-2 kernels (mamba2_perf): the context conv Grid per structure, the first structure at a d_model for an
uncollected one, the roofline for the SSM scan, decode kernels and d_models without rows; parity with 0.12.0."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import EstimatorError, NoDataError

NANO = {"d_model": 2688, "nheads": 64, "head_dim": 64, "d_state": 128, "d_conv": 4, "n_groups": 8, "chunk_size": 128}
KERNELS = [("causal_conv1d_fn", "context"), ("mamba_chunk_scan_combined", "context"), ("causal_conv1d_update", "generation"),
           ("selective_state_update", "generation")]


def frame(system, backend, version, kernel, phase, dims, batch, seq):
    n = len(batch)
    return pl.DataFrame({"system": [system] * n, "backend": [backend] * n, "version": [version] * n, "kernel": [kernel] * n,
                         "phase": [phase] * n, **{k: [v] * n for k, v in dims.items()}, "batch": batch, "seq": seq})


def slices() -> list[tuple[str, str, str]]:
    """Every (system, trtllm, version) of the wheel that holds mamba2_perf, plus the later trtllm versions there
    (they read it as an earlier version)."""
    import aiconfigurator_core

    data = Path(aiconfigurator_core.__file__).parent / "systems" / "data"
    out = []
    for table in sorted(data.glob("*/linear_attention/trtllm/*/mamba2_perf.parquet")):
        system, version = table.parts[-5], table.parts[-2]
        out += [(system, "trtllm", v.name) for v in sorted((data / system / "gemm" / "trtllm").iterdir()) if v.name >= version]
    return out


def test_exact_rows_bilinear_midpoint_and_first_structure_fallback(wheel_est):
    cell = ("h200_sxm", "trtllm", "1.3.0rc20")
    rows = wheel_est.table(*cell, "mamba2_perf", shared=True).filter(
        pl.col("kernel_source") == "causal_conv1d_fn", pl.col("d_model") == 2688, pl.col("batch_size").is_in([2, 4]),
        pl.col("seq_len").is_in([1024, 2048]))
    lat = {(b, s): v for b, s, v in rows.select("batch_size", "seq_len", "latency").iter_rows()}
    out = estimate(wheel_est, "mamba2_kernel", frame(*cell, "causal_conv1d_fn", "context", NANO, [2, 3], [1024, 1536]))
    assert out["latency_ms"][0] == lat[(2, 1024)]
    assert out["latency_ms"][1] == pytest.approx(sum(lat.values()) / 4, rel=1e-12)
    assert out["source"].to_list() == ["silicon"] * 2
    # a structure not collected at this d_model reads the first collected one, unscaled, still silicon
    uncollected = {**NANO, "nheads": 32, "d_state": 64}
    other = estimate(wheel_est, "mamba2_kernel", frame(*cell, "causal_conv1d_fn", "context", uncollected, [2], [1024]))
    assert (other["latency_ms"][0], other["source"][0]) == (lat[(2, 1024)], "silicon")


def test_scan_decode_and_uncollected_d_model_answer_the_roofline(wheel_est):
    cell = ("h200_sxm", "trtllm", "1.3.0rc20")
    for kernel, phase, dims in (("mamba_chunk_scan_combined", "context", NANO), ("causal_conv1d_update", "generation", NANO),
                                ("causal_conv1d_fn", "context", {**NANO, "d_model": 3000})):
        q = frame(*cell, kernel, phase, dims, [2, 8], [1024, 1024])
        for mode in ("silicon", "hybrid", "empirical", "sol"):
            out = estimate(wheel_est, "mamba2_kernel", q, mode=mode)
            assert out["source"].to_list() == ["sol"] * 2 and (out["latency_ms"] == out["sol_ms"]).all()
    # SOL mode reads the conv rows too (0.12.0's static engine does), not the roofline (d_model never enters it)
    q = frame(*cell, "causal_conv1d_fn", "context", NANO, [2, 8], [1024, 1024])
    sol = estimate(wheel_est, "mamba2_kernel", q, mode="sol")
    assert sol.select("latency_ms", "source").equals(estimate(wheel_est, "mamba2_kernel", q).select("latency_ms", "source"))
    assert sol["source"].to_list() == ["silicon"] * 2 and (sol["latency_ms"] != out["latency_ms"]).all()
    with pytest.raises(NoDataError, match="phase 'verify' is not priced"):
        estimate(wheel_est, "mamba2_kernel", frame(*cell, "causal_conv1d_fn", "verify", NANO, [2], [2]))
    with pytest.raises(EstimatorError, match="no roofline for kernel 'no_such_kernel'"):
        estimate(wheel_est, "mamba2_kernel", frame(*cell, "no_such_kernel", "context", NANO, [2], [2]))


@given(b=st.integers(1, 512), s=st.integers(1, 70000), k=st.integers(1, 4), form=st.sampled_from(["conv", "scan"]))
def test_roofline_is_linear_in_tokens_and_grows_with_every_structure_dim(b, s, k, form):
    from perfledger.estimator.fit.roofline import mamba2_sol

    one = float(mamba2_sol(form, b * s, 64, 64, 128, 4, 8, 1e12)[0])
    assert float(mamba2_sol(form, b * s * k, 64, 64, 128, 4, 8, 1e12)[0]) == pytest.approx(one * k)
    for dims in ((128, 64, 128, 4, 8), (64, 128, 128, 4, 8), (64, 64, 256, 4, 8), (64, 64, 128, 4, 16)):
        assert float(mamba2_sol(form, b * s, *dims, 1e12)[0]) > one


@pytest.mark.aic
@pytest.mark.parametrize("cell", slices())
def test_mamba2_matches_reference_on_every_slice(wheel_est, oracle, cell):
    """Every kernel at random batch / seq inside, between and beyond the grid, at each collected structure, an
    uncollected one at a collected d_model and an uncollected d_model: value and tier agree."""
    from aiconfigurator_core.sdk.operations import Mamba2Kernel

    rows = wheel_est.table(*cell, "mamba2_perf", shared=True)
    shapes = rows.select("d_model", "nheads", "head_dim", "d_state", "d_conv", "n_groups", "chunk_size").unique().rows(named=True)
    shapes += [{**shapes[0], "nheads": 96, "d_state": 64}, {**NANO, "d_model": 5120}]
    rng = np.random.default_rng(sum(map(ord, "".join(cell))))
    handle = oracle.handle(*cell)
    for kernel, phase in KERNELS:
        for dims in shapes:
            b = int(np.exp(rng.uniform(0, np.log(200 if phase == "context" else 4000))))
            s = int(np.exp(rng.uniform(0, np.log(80000)))) if phase == "context" else 1
            op = Mamba2Kernel("k", 1.0, kernel, phase, hidden_size=dims["d_model"], nheads=dims["nheads"],
                              head_dim=dims["head_dim"], d_state=dims["d_state"], d_conv=dims["d_conv"],
                              n_groups=dims["n_groups"], chunk_size=dims["chunk_size"])
            ref = handle.evaluate_ops_json(oracle.build([op]), is_context=phase == "context", batch_size=b, s=s,
                                           x=b * s if phase == "context" else b)[0]
            out = estimate(wheel_est, "mamba2_kernel", frame(*cell, kernel, phase, dims, [b], [s]))
            assert (out["latency_ms"][0], out["source"][0]) == (pytest.approx(ref[1], rel=1e-9, abs=1e-15), ref[3]), \
                (kernel, dims, b, s)
