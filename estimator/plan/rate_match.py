"""Rate matching: how many prefill and decode workers of two candidates make the best xPyD replica.

Why: a disaggregated replica serves min(prefill pool rate, decode pool rate); the worker counts that maximise
that rate per GPU, within the replica sizes allowed, decide whether a prefill/decode pair is worth deploying.
0.12.0 walks decode counts (outer) and prefill counts (inner) and keeps the first strictly better count pair;
here every pair of candidates is answered at once over the whole count grid, with the same arithmetic order
(rate × count × degradation, then min, then ÷ GPUs) so equal inputs give bit-equal answers and the same ties.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_CHUNK = 1024  # candidate pairs per grid evaluation (~8 MiB of float64 per array at 32 × 32 counts)


@dataclass(frozen=True)
class Pools:
    """What the matching may use: worker counts 1..max per pool, replica GPU counts, degradation factors."""

    max_prefill: int
    max_decode: int
    replica_gpus: frozenset[int]
    prefill_degradation: float
    decode_degradation: float


def match(prefill_rate, prefill_gpus, decode_rate, decode_gpus, pools: Pools) -> tuple[np.ndarray, np.ndarray]:
    """(prefill workers, decode workers) per candidate pair; -1 where no allowed replica size has a rate > 0.

    Each argument is an array over pairs: one worker's seq/s and GPUs on each side."""
    p_rate, p_gpus = np.asarray(prefill_rate, dtype=float), np.asarray(prefill_gpus, dtype=np.int64)
    d_rate, d_gpus = np.asarray(decode_rate, dtype=float), np.asarray(decode_gpus, dtype=np.int64)
    p_num = np.arange(1, pools.max_prefill + 1)
    d_num = np.arange(1, pools.max_decode + 1)
    allowed = np.array(sorted(pools.replica_gpus), dtype=np.int64)
    out_p = np.full(len(p_rate), -1, dtype=np.int64)
    out_d = np.full(len(p_rate), -1, dtype=np.int64)
    for start in range(0, len(p_rate), _CHUNK):
        rows = slice(start, start + _CHUNK)
        p_cap = p_rate[rows, None] * p_num[None, :] * pools.prefill_degradation  # (pairs, prefill counts)
        d_cap = d_rate[rows, None] * d_num[None, :] * pools.decode_degradation  # (pairs, decode counts)
        gpus = d_gpus[rows, None, None] * d_num[None, :, None] + p_gpus[rows, None, None] * p_num[None, None, :]
        per_gpu = np.minimum(d_cap[:, :, None], p_cap[:, None, :]) / gpus  # (pairs, decode counts, prefill counts)
        per_gpu[~np.isin(gpus, allowed)] = 0.0
        flat = per_gpu.reshape(len(per_gpu), -1)
        best = flat.argmax(axis=1)  # the first maximum: decode counts outer, prefill counts inner
        found = flat[np.arange(len(flat)), best] > 0.0
        out_d[rows] = np.where(found, best // len(p_num) + 1, -1)
        out_p[rows] = np.where(found, best % len(p_num) + 1, -1)
    return out_p, out_d
