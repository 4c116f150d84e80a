"""MLA ops (context, generation, pre/post BMM): rooflines and SILICON answers equal the reference's."""

from __future__ import annotations

import zlib

import numpy as np
import polars as pl
import pytest

from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import EstimatorError, UnknownQuantError
from perfledger.estimator.fit.roofline import mla_bmm_sol
from perfledger.estimator.ops.mla.kernels import dims

MLA_SLICES = [("h200_sxm", "trtllm", "1.3.0rc20"), ("b200_sxm", "trtllm", "1.3.0rc20"), ("h200_sxm", "sglang", "0.5.14"),
              ("b200_sxm", "vllm", "0.24.0")]
HEADS = [1, 2, 3, 4, 8, 16, 24, 32, 64, 96, 128, 256]


def _ours(est, op, row, mode="silicon"):
    try:
        return estimate(est, op, pl.DataFrame({k: [v] for k, v in row.items()}), mode=mode).item(0, "latency_ms")
    except EstimatorError:
        return None


def _queries(rng, base):
    """One random context, generation and BMM query: in-data, interpolated, beyond every axis, unseen heads."""
    heads, kv = int(rng.choice(HEADS)), str(rng.choice(["bfloat16", "fp8"]))
    isl = int(rng.choice([1, 16, 1024, 40000])) if rng.random() < 0.3 else int(rng.integers(1, 40000))
    yield "context_mla", {**base, "fmha_quant": str(rng.choice(["bfloat16", "bfloat16", "fp8"])), "kv_quant": kv,
                          "heads": heads, "isl": isl, "batch": int(rng.choice([1, 2, 3, 8, 64, 256, 512]))}
    seq = int(rng.choice([2, 3, 1024])) if rng.random() < 0.2 else int(np.exp(rng.uniform(np.log(2), np.log(300000))))
    yield "generation_mla", {**base, "kv_quant": kv, "heads": heads, "batch": int(rng.choice([1, 3, 8, 256, 1024, 4096])),
                             "seq": seq}
    tokens = int(rng.choice([1, 8192, 20480, 30000])) if rng.random() < 0.2 else int(rng.integers(1, 30000))
    yield "mla_bmm", {**base, "quant": str(rng.choice(["bfloat16", "fp8"])), "phase": str(rng.choice(["pre", "post"])),
                      "heads": heads, "tokens": tokens}


@pytest.mark.aic
@pytest.mark.parametrize("system,backend,version", MLA_SLICES)
def test_mla_ops_match_reference(wheel_est, oracle, system, backend, version):
    """SILICON (both-miss or within 1e-6) and SOL (within 1e-6) over random queries of all three ops."""
    rng = np.random.default_rng(zlib.crc32(f"mla/{system}/{backend}".encode()))
    base = dict(system=system, backend=backend, version=version)
    answered = {"context_mla": 0, "generation_mla": 0, "mla_bmm": 0}
    for _ in range(40):
        for op, row in _queries(rng, base):
            ref, ref_sol = oracle.mla(system, backend, version, op, row)
            assert abs(_ours(wheel_est, op, row, "sol") - ref_sol) <= 1e-6 * ref_sol, (op, row)
            ours = _ours(wheel_est, op, row)
            assert (ours is None) == (ref is None), f"one side misses: ours={ours} ref={ref} {op} {row}"
            if ref is not None:
                assert abs(ours - ref) <= 1e-6 * ref, (op, row, ours, ref)
                answered[op] += 1
    floor = {"context_mla": 0 if backend == "vllm" else 20, "generation_mla": 0 if backend == "vllm" else 30, "mla_bmm": 30}
    assert all(answered[op] >= floor[op] for op in answered), answered


def test_bmm_between_head_counts_scales_the_next_one_up(wheel_est):
    base = dict(system="h200_sxm", backend="trtllm", version="1.3.0rc20", quant="fp8", phase="pre", tokens=1)
    at32 = _ours(wheel_est, "mla_bmm", {**base, "heads": 32})
    spec = wheel_est.spec("h200_sxm")
    sol = [mla_bmm_sol(1, h, 1.0, dims(), spec.tc_flops("fp8"), spec.mem_bw)[0] for h in (24, 32)]
    assert _ours(wheel_est, "mla_bmm", {**base, "heads": 24}) == pytest.approx(at32 * sol[0] / sol[1], rel=1e-12)
    assert _ours(wheel_est, "mla_bmm", {**base, "heads": 4096}) is None  # above every collected head count


def test_unpriced_mla_quant_is_a_typed_error(wheel_est):
    row = dict(system="h200_sxm", backend="trtllm", version="1.3.0rc20", kv_quant="nvfp4", heads=128, batch=1, seq=100)
    with pytest.raises(UnknownQuantError, match="nvfp4"):
        estimate(wheel_est, "generation_mla", pl.DataFrame({k: [v] for k, v in row.items()}))


@pytest.mark.aic
@pytest.mark.parametrize("mode", ["empirical", "hybrid"])
@pytest.mark.parametrize("system,backend,version", [("h200_sxm", "trtllm", "1.3.0rc20"), ("b200_sxm", "vllm", "0.24.0")])
def test_mla_empirical_and_hybrid_match_reference(wheel_est, oracle, system, backend, version, mode):
    """UtilGrid answers (BMM: the head count or the next one up; vllm fp8 BMM reads bf16) and both-miss cases."""
    rng = np.random.default_rng(zlib.crc32(f"mla-{mode}/{system}/{backend}".encode()))
    base = dict(system=system, backend=backend, version=version)
    answered = 0
    for _ in range(30):
        for op, row in _queries(rng, base):
            ref, _ = oracle.mla(system, backend, version, op, row, mode=mode.upper())
            ours = _ours(wheel_est, op, row, mode)
            assert (ours is None) == (ref is None), f"one side misses: ours={ours} ref={ref} {op} {row}"
            if ref is not None:
                assert abs(ours - ref) <= 1e-6 * ref, (op, row, ours, ref)
                if mode == "empirical":
                    label = estimate(wheel_est, op, pl.DataFrame({k: [v] for k, v in row.items()}), mode=mode).item(0, "source")
                    assert label == oracle.handle(system, backend, version, "EMPIRICAL").last_provenance() == "empirical"
                answered += 1
    assert answered >= 25, answered
