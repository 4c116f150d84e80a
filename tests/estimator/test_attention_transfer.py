"""Context attention outside the data: nearest-leaf util transfer and misses agree with the reference.

Random GQA/MHA queries (heads = kv_heads × 1..8, isl up to 40k, batch up to 512) that leave the serving
pool's collected grid (beyond a range or past the corner-truncated staircase), on four systems/backends.
Both sides must miss together or agree within 1e-6 relative.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from tests.estimator.test_attention import ATTN_SLICES, _ours, in_data, sampled_slices


@pytest.mark.aic
@pytest.mark.parametrize("system,backend,version", ATTN_SLICES)
def test_out_of_data_context_attention_matches_reference(wheel_est, oracle, system, backend, version):
    rng = np.random.default_rng(zlib.crc32(f"transfer/{system}/{backend}".encode()))
    worst, answered, missed = 0.0, 0, 0
    for key, seen in sampled_slices(wheel_est, system, backend, version, "attention", rng, 10):
        for _ in range(25):
            heads = int(rng.choice(seen)) if rng.random() < 0.5 else int(key["kv_heads"] * rng.integers(1, 9))
            isl = int(rng.choice([1, 16, 3000, 16384, 32768])) if rng.random() < 0.3 else int(rng.integers(2, 40000))
            batch = int(rng.choice([1, 3, 8, 64, 200, 512]))
            if in_data(wheel_est, key, heads, isl, batch):
                continue
            row = {**key, "heads": heads, "isl": isl, "batch": batch, "qk_norm": False}
            ours = _ours(wheel_est, row)
            ref = oracle.context_attention(system, backend, version, key["fmha_quant"], key["kv_quant"], key["head_dim"],
                                           key["window"], key["kv_heads"], heads, isl, batch)
            assert (ours is None) == (ref is None), f"one side misses: ours={ours} ref={ref} {row}"
            if ref is None:
                missed += 1
                continue
            worst, answered = max(worst, abs(ours - ref) / ref), answered + 1
    assert worst <= 1e-6 and answered >= 60, (worst, answered, missed)


@pytest.mark.aic
@pytest.mark.parametrize("system,backend,version", ATTN_SLICES)
def test_out_of_data_generation_attention_matches_reference(wheel_est, oracle, system, backend, version):
    """Decode queries whose 5 kv samples leave the pool's grid (s = 2 included: a kv step of 0)."""
    import polars as pl

    from perfledger.estimator.batch import estimate
    from perfledger.estimator.errors import EstimatorError
    from tests.estimator.test_attention import gen_in_data

    rng = np.random.default_rng(zlib.crc32(f"gen-transfer/{system}/{backend}".encode()))
    worst, answered = 0.0, 0
    for key, seen in sampled_slices(wheel_est, system, backend, version, "generation_attention", rng, 10,
                                    kv_quants=oracle.common.KVCacheQuantMode.__members__):
        for _ in range(20):
            heads = int(rng.choice(seen)) if rng.random() < 0.5 else int(key["kv_heads"] * rng.integers(1, 9))
            batch = int(rng.choice([1, 3, 8, 64, 200, 1024]))
            seq = 2 if rng.random() < 0.1 else int(np.exp(rng.uniform(np.log(2), np.log(300000))))
            if gen_in_data(wheel_est, key, heads, batch, seq):
                continue
            frame = pl.DataFrame({k: [v] for k, v in {**key, "heads": heads, "batch": batch, "seq": seq}.items()})
            try:
                ours = estimate(wheel_est, "generation_attention", frame).item(0, "latency_ms")
            except EstimatorError:
                ours = None
            ref = oracle.generation_attention(system, backend, version, key["kv_quant"], key["head_dim"], key["window"],
                                              key["kv_heads"], heads, batch, seq)
            assert (ours is None) == (ref is None), f"one side misses: ours={ours} ref={ref} {key} h={heads} b={batch} s={seq}"
            if ref is not None:
                worst, answered = max(worst, abs(ours - ref) / ref), answered + 1
    assert worst <= 1e-6 and answered >= 40, (worst, answered)
