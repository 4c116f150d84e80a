"""Price many op lists at once: every query of one op across all the lists goes through one batch call.

Why: a search prices thousands of (configuration, step) points of a few dozen ops each; one `estimate` call per
op per point would spend its time building one-row frames. Here the op lists (name, op, query, scale), as the
layer plans and plan/steps.py write them, are gathered per op into one frame, answered by `batch.estimate`, and
scattered back, so a sweep costs one vectorised call per op kind (op semantics as in static.price).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import polars as pl

from perfledger.estimator.batch import estimate
from perfledger.estimator.fit.roofline import mem_op_latency

OpList = list[tuple[str, str, dict, float]]


def price_many(est, op_lists: list[OpList], spec, mode: str = "silicon") -> list[dict[str, float]]:
    """Latency (ms, × scale) per op name for each op list, in order (same answers as static.price per list)."""
    out: list[dict[str, float]] = [{} for _ in op_lists]
    groups: list[tuple[int, str, OpList, float]] = []  # overlap groups: (list index, name, ops, scale)
    pending: dict[str, list[tuple[int, str, dict, float]]] = defaultdict(list)
    mem: list[tuple[int, str, float, float]] = []  # table-less memory ops, priced in one array below
    for i, ops in enumerate(op_lists):
        for name, op, query, scale in ops:
            if op == "mem":
                out[i][name] = 0.0  # its place in the list's order (sums read it in order)
                mem.append((i, name, query["bytes"], scale))
            elif op == "p2p":
                out[i][name] = p2p_latency(query["bytes"], spec) * scale
            elif op == "allreduce" and query["tp"] <= 1:
                out[i][name] = 0.0
            elif op == "overlap":
                groups.append((i, name, query["groups"], scale))
            else:
                pending[op].append((i, name, query, scale))
    if mem:
        latency = mem_op_latency(np.array([b for _, _, b, _ in mem], dtype=np.float64), spec).tolist()
        for (i, name, _, scale), ms in zip(mem, latency, strict=True):
            out[i][name] = ms * scale
    for op, rows in pending.items():  # identical queries (steps sharing a shape) are answered once
        unique: dict[tuple, int] = {}  # keyed in the query's own order: one plan writes one op's keys in one order
        slots = [unique.setdefault(tuple(q.items()), len(unique)) for _, _, q, _ in rows]
        frame = pl.DataFrame([dict(key) for key in unique], infer_schema_length=None)
        latency = estimate(est, op, frame, mode=mode)["latency_ms"].to_numpy()
        for (i, name, _, scale), slot in zip(rows, slots, strict=True):
            out[i][name] = float(latency[slot]) * scale
    if groups:  # parallel op groups (decode streams): the slower group's sum
        flat = [g for _, _, gs, _ in groups for g in gs]
        priced = iter(price_many(est, flat, spec, mode))
        for i, name, gs, scale in groups:
            out[i][name] = max(sum(next(priced).values()) for _ in gs) * scale
    return out


def p2p_latency(nbytes, spec) -> float:
    """Pipeline-stage hand-off (ms): the activation over the inter-node link plus its latency, as 0.12.0 prices it
    (for any stage placement)."""
    return float((np.asarray(nbytes, dtype=np.float64) / spec.inter_node_bw + spec.p2p_latency) * 1000.0)
