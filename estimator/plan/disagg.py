"""The disaggregated search: prefill and decode worker candidates rate-matched into xPyD replicas under an SLA.

Why: in disaggregated serving the prefill and the decode pools are sized separately, so the answer is a pair
of worker layouts plus worker counts, not one layout. As 0.12.0 does: prefill workers whose queue-corrected
TTFT meets the TTFT target (the best 32 by seq/s/GPU, then smaller batch), decode workers whose TPOT meets
each TPOT target of the sweep (per decode parallel layout, its best 16), every pair rate-matched
(rate_match.py), the best replica per decode layout kept, the best 5 per TPOT target, repeats dropped.
Worker metrics arrive rounded to 0.001 as 0.12.0's worker tables are; replica rows are rounded the same way.
Sorts use numpy's quicksort on the same arrays in the same order as 0.12.0's frames, so ties fall alike.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import polars as pl

from perfledger.estimator.plan.rate_match import Pools, match
from perfledger.estimator.plan.space import DIMS, Parallel
from perfledger.safe_io import data_yaml

DISAGG_YAML = Path(__file__).with_name("disagg.yaml")

# the columns of each side of a replica row (prefixed p_ / d_), `workers` first
SIDE = ("workers", *DIMS, "batch", "global_batch", "gpus", "seq_s")


@cache
def settings() -> dict:
    return data_yaml(DISAGG_YAML)


def _ranges(spans: list[dict]) -> list[int]:
    return sorted({v for r in spans for v in range(r["from"], r["to"], r["step"])})


def decode_batches(doc: dict | None = None) -> list[int]:
    """Decode batch sizes tried per layout (disagg.yaml `decode_batches`), ascending."""
    return _ranges((doc or settings())["decode_batches"])


def tpot_sweep(doc: dict | None = None) -> list[float]:
    """The TPOT targets (ms) the frontier is drawn from (disagg.yaml `tpot_sweep`), ascending."""
    return [float(t) for t in _ranges((doc or settings())["tpot_sweep"])]


def parallel_key(frame: pl.DataFrame) -> list[str]:
    """0.12.0's layout label (plan/space.py `Parallel.label`); decode categories group and sort by it."""
    return [Parallel(*dims).label for dims in frame.select(*(c for c in DIMS if c in frame.columns)).iter_rows()]


def argsort_desc(values: np.ndarray) -> np.ndarray:
    """Descending order as pandas' single-column sort_values gives it (reverse, quicksort, reverse)."""
    reversed_index = np.arange(len(values))[::-1]
    return reversed_index[values[::-1].argsort(kind="quicksort")][::-1]


def _prefill_records(prefill: pl.DataFrame, ttft_target: float, queue_factor: float, keep: int) -> pl.DataFrame:
    """Prefill workers meeting TTFT after the queueing factor, best `keep` by seq/s/GPU then smaller global batch."""
    corrected = prefill.with_columns(pl.col("ttft_ms") * queue_factor)
    corrected = corrected.filter(pl.col("ttft_ms") < ttft_target)
    order = np.lexsort((corrected["global_batch"].to_numpy(), -corrected["seq_s_gpu"].to_numpy()))
    return corrected[order[:keep]]


def _combine(p: dict, p_num: np.ndarray, d: dict, d_num: np.ndarray, osl: int, doc: dict) -> dict[str, np.ndarray]:
    """Replica metrics of matched pairs (p, d: column arrays already gathered per pair), unrounded."""
    deg = doc["degradation"]
    seq_s = np.minimum(p["seq_s"] * p_num * deg["prefill"], d["seq_s"] * d_num * deg["decode"])
    gpus = p["gpus"] * p_num + d["gpus"] * d_num
    row = {"seq_per_s": seq_s, "gpus": gpus, "seq_per_s_per_gpu": seq_s / gpus, "tokens_per_s": seq_s * osl,
           "tokens_per_s_per_gpu": seq_s * osl / gpus, "tokens_per_s_per_user": d["tokens_s_user"],
           "ttft_ms": p["ttft_ms"], "tpot_ms": d["tpot_ms"],
           "request_latency_ms": p["ttft_ms"] + d["tpot_ms"] * max(osl - 1, 0),
           "concurrency": d["concurrency"] * d_num}
    for side, cols, num in (("p", p, p_num), ("d", d, d_num)):
        row[f"{side}_workers"] = num
        for c in SIDE[1:]:
            row[f"{side}_{c}"] = cols[c]
    return row


def _large_ep(workers: pl.DataFrame) -> np.ndarray:
    """Per worker row: priced through the MoE all-to-all (workers.py `large_ep`; False for frames without it)."""
    if "large_ep" not in workers.columns:
        return np.zeros(workers.height, dtype=bool)
    return workers["large_ep"].to_numpy().astype(bool)


def _best_per_tpot(prefill_rec: pl.DataFrame, decode: pl.DataFrame, decode_keys: np.ndarray, tpot_target: float,
                   matched: dict, osl: int, same_tp: bool, doc: dict) -> list[dict]:
    """The best replica of each decode layout under one TPOT target, then the best `per_tpot_target` of them."""
    keep = doc["candidates"]
    tpot = decode["tpot_ms"].to_numpy()
    ok = np.flatnonzero((tpot < tpot_target) & (tpot > 0.0))
    if not len(ok) or not prefill_rec.height:
        return []
    p_cols = {c: prefill_rec[c].to_numpy() for c in (*SIDE[1:], "ttft_ms")}
    d_all = {c: decode[c].to_numpy() for c in (*SIDE[1:], "tpot_ms", "tokens_s_user", "concurrency")}
    p_large, d_large = (_large_ep(frame) for frame in (prefill_rec, decode))
    seq_s_gpu = decode["seq_s_gpu"].to_numpy()
    best_rows = []
    for key in sorted(set(decode_keys[ok])):
        group = ok[decode_keys[ok] == key]
        group = group[argsort_desc(seq_s_gpu[group])][:keep["decode_per_parallel"]]
        # pairs in 0.12.0's loop order: decode worker (outer) × prefill worker (inner)
        d_idx = np.repeat(group, prefill_rec.height)
        p_idx = np.tile(np.arange(prefill_rec.height), len(group))
        if same_tp:  # a pair with a large-EP side is exempt (0.12.0: its KV transfer layout differs anyway)
            same = (p_cols["tp"][p_idx] == d_all["tp"][d_idx]) | p_large[p_idx] | d_large[d_idx]
            d_idx, p_idx = d_idx[same], p_idx[same]
        p_num, d_num = matched["p"][p_idx, d_idx], matched["d"][p_idx, d_idx]
        found = (p_num > 0) & (d_num > 0)
        if not found.any():
            continue
        p_idx, d_idx, p_num, d_num = p_idx[found], d_idx[found], p_num[found], d_num[found]
        row = _combine({c: v[p_idx] for c, v in p_cols.items()}, p_num,
                       {c: v[d_idx] for c, v in d_all.items()}, d_num, osl, doc)
        # the first maximum of (tokens/s/GPU, fewer GPUs)
        best = np.lexsort((row["gpus"], -row["tokens_per_s_per_gpu"]))[0]
        best_rows.append({c: v[best] for c, v in row.items()})
    if not best_rows:
        return []
    rounded = [{c: _round(v) for c, v in r.items()} for r in best_rows]
    order = argsort_desc(np.array([r["tokens_per_s_per_gpu"] for r in rounded]))
    return [rounded[i] for i in order[:keep["per_tpot_target"]]]


def _round(value):
    return float(np.round(value, 3)) if isinstance(value, float | np.floating) else int(value)


def replicas(prefill: pl.DataFrame, decode: pl.DataFrame, *, osl: int, ttft: float, tpot_targets: list[float],
             backend: str, total_gpus: int, doc: dict | None = None) -> pl.DataFrame:
    """Every replica the search keeps over the TPOT targets (0.12.0's disagg candidate set), best first.

    prefill / decode: worker candidates (workers.py columns) that fit in memory, corrections applied; a
    replica holds at most `total_gpus` GPUs, in the sizes disagg.yaml `replica_gpus` lists."""
    doc = doc or settings()
    keep = doc["candidates"]
    prefill_rec = _prefill_records(prefill, ttft, doc["ttft_queue_factor"], keep["prefill"])
    if not prefill_rec.height or not decode.height:
        return pl.DataFrame()
    sizes = frozenset(n for n in doc["replica_gpus"] if n <= total_gpus)
    pools = Pools(doc["max_workers"]["prefill"], doc["max_workers"]["decode"], sizes, doc["degradation"]["prefill"],
                  doc["degradation"]["decode"])
    # the matching does not depend on the TPOT target: answer every (prefill record, decode worker) pair once
    p_idx = np.repeat(np.arange(prefill_rec.height), decode.height)
    d_idx = np.tile(np.arange(decode.height), prefill_rec.height)
    p_num, d_num = match(prefill_rec["seq_s"].to_numpy()[p_idx], prefill_rec["gpus"].to_numpy()[p_idx],
                         decode["seq_s"].to_numpy()[d_idx], decode["gpus"].to_numpy()[d_idx], pools)
    shape = (prefill_rec.height, decode.height)
    matched = {"p": p_num.reshape(shape), "d": d_num.reshape(shape)}
    keys = np.array(parallel_key(decode))
    same_tp = backend in doc["same_tp_backends"]
    rows: list[dict] = []
    seen: set[tuple] = set()
    for target in tpot_targets:
        for row in _best_per_tpot(prefill_rec, decode, keys, target, matched, osl, same_tp, doc):
            identity = tuple(row.values())
            if identity not in seen:  # 0.12.0 drops repeated rows across TPOT targets, the first kept
                seen.add(identity)
                rows.append(row)
    if not rows:
        return pl.DataFrame()
    # 0.12.0 sorts this frame on an object-dtype column (its concat starts from an empty frame)
    order = argsort_desc(np.array([r["tokens_per_s_per_gpu"] for r in rows], dtype=object))
    return pl.DataFrame([rows[i] for i in order])
