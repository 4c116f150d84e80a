"""Price many op lists at once: every query of one op across all the lists goes through one batch call.

Why: a search prices thousands of (configuration, step) points of a few dozen ops each; one `estimate` call per
op per point would spend its time building one-row frames. Here the op lists (name, op, query, scale), as the
layer plans and plan/steps.py write them, are gathered per op into one frame, answered by `batch.estimate`, and
scattered back, so a sweep costs one vectorised call per op kind (op semantics as in static.price). A `fallback`
op (DeepSeek's MLA module with its granular ops) prices every list's primary ops in one call, and where that call
misses, each primary alone, the missing ones through their fallback ops (static.fallback's rule, batched).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import polars as pl

from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError
from perfledger.estimator.fit.roofline import mem_op_latency

OpList = list[tuple[str, str, dict, float]]


def price_many(est, op_lists: list[OpList], spec, mode: str = "silicon",
               tiers: list[set[str]] | None = None) -> list[dict[str, float]]:
    """Latency (ms, × scale) per op name for each op list, in order (same answers as static.price per list).

    `tiers`: when given (one set per op list), each list's set gets the source tier of every op the batch API
    answered (silicon, xshape, sol, ...): the support matrix grades a deployment by its least confident op."""
    out: list[dict[str, float]] = [{} for _ in op_lists]
    groups: list[tuple[int, str, OpList, float]] = []  # overlap groups: (list index, name, ops, scale)
    pending: dict[str, list[tuple[int, str, dict, float]]] = defaultdict(list)
    fallbacks: list[tuple[int, str, dict, float]] = []  # module op with a granular fallback (static.fallback)
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
            elif op == "fallback":
                fallbacks.append((i, name, query, scale))
            else:
                pending[op].append((i, name, query, scale))
    if mem:
        latency = mem_op_latency(np.array([b for _, _, b, _ in mem], dtype=np.float64), spec).tolist()
        for (i, name, _, scale), ms in zip(mem, latency, strict=True):
            out[i][name] = ms * scale
    for op, rows in pending.items():  # identical queries (steps sharing a shape) are answered once
        unique: dict[tuple, int] = {}  # keyed in the query's own order: one plan writes one op's keys in one order
        by_id: dict[int, int] = {}  # a query object shared by many lists (static.decode_passes) is keyed once
        slots = []
        for _, _, q, _ in rows:
            slot = by_id.get(id(q))
            if slot is None:
                slot = by_id[id(q)] = unique.setdefault(tuple(q.items()), len(unique))
            slots.append(slot)
        frame = pl.DataFrame([dict(key) for key in unique], infer_schema_length=None)
        answer = estimate(est, op, frame, mode=mode)
        latency = answer["latency_ms"].to_numpy()
        for (i, name, _, scale), slot in zip(rows, slots, strict=True):
            out[i][name] = out[i].get(name, 0.0) + float(latency[slot]) * scale
        if tiers is not None:
            source = answer["source"].to_list()
            for (i, _, _, _), slot in zip(rows, slots, strict=True):
                tiers[i].add(source[slot])
    if groups:  # parallel op groups (decode streams): the slower group's sum
        flat = [g for _, _, gs, _ in groups for g in gs]
        flat_tiers = [set() for _ in flat] if tiers is not None else None
        priced = iter(price_many(est, flat, spec, mode, flat_tiers))
        owners = iter(flat_tiers or [])
        for i, name, gs, scale in groups:
            out[i][name] = max(sum(next(priced).values()) for _ in gs) * scale
            if tiers is not None:
                for _ in gs:
                    tiers[i] |= next(owners)
    if fallbacks:
        _price_fallbacks(est, fallbacks, spec, mode, out, tiers)
    return out


def price_steps(est, passes: list[list[OpList]], spec, mode: str = "silicon",
                tiers: list[set[str]] | None = None) -> list[list[float]]:
    """Σ op latency (ms) of every step of every point: `passes` holds per point the op lists of its steps, the ops
    a step does not change shared by identity (static.decode_passes); each sum equals sum(price_many(...)[k].values()).

    Why: a decode worker's ~30 steps differ in their attention op alone, so gathering every op of every step was most
    of a search's pricing. A point's first step is priced whole and each later one only in its own ops, all in one
    price_many call, in the order the whole lists would have been (op kinds meet in the same order, so every name
    accumulates its ops in the same order); a later step's sum then reads the first step's per-name values with its
    own replaced, in the first step's name order, so it is the whole list's sum bit for bit. A point whose step ops
    share a name with an op all steps share is priced whole. `tiers`: one set per point, filled as price_many's."""
    lists: list[OpList] = []
    layout = []  # per point: (its first list's index, the later steps' indices, whether those are own ops only)
    for steps in passes:
        first = steps[0]
        own = [i for i, op in enumerate(first) if any(step[i] is not op for step in steps[1:])]
        split = not ({first[i][0] for i in own} & {op[0] for i, op in enumerate(first) if i not in own})
        start = len(lists)
        lists += [first] + [[step[i] for i in own] if split else step for step in steps[1:]]
        layout.append((start, range(start + 1, len(lists)), split))
    list_tiers = [set() for _ in lists] if tiers is not None else None
    priced = price_many(est, lists, spec, mode, list_tiers)
    out = []
    for k, (start, later, split) in enumerate(layout):
        head = priced[start]
        out.append([sum(head.values())] + [sum({**head, **priced[j]}.values()) if split else sum(priced[j].values())
                                           for j in later])
        if tiers is not None:
            for j in (start, *later):
                tiers[k] |= list_tiers[j]
    return out


def _price_fallbacks(est, fallbacks: list, spec, mode: str, out: list[dict], tiers: list[set] | None) -> None:
    """`fallback` ops as static.fallback prices them: the primary ops (in SILICON under HYBRID), and where a primary
    misses data, its fallback ops; all primaries in one call, lists one by one only when that call misses."""
    primary_mode = "silicon" if mode == "hybrid" else mode
    primaries = [query["primary"] for _, _, query, _ in fallbacks]
    found = [set() for _ in fallbacks] if tiers is not None else None
    try:
        priced: list[dict | None] = price_many(est, primaries, spec, primary_mode, found)
    except (NoDataError, EmpiricalUnavailableError):
        priced = []
        for k, ops in enumerate(primaries):
            try:
                priced.append(price_many(est, [ops], spec, primary_mode, None if found is None else [found[k]])[0])
            except (NoDataError, EmpiricalUnavailableError):
                priced.append(None)
                if found is not None:
                    found[k].clear()
    missed = [k for k, ms in enumerate(priced) if ms is None]
    if missed:
        backup = [set() for _ in missed] if found is not None else None
        for k, ms, t in zip(missed, price_many(est, [fallbacks[k][2]["fallback"] for k in missed], spec, mode, backup),
                            backup or [None] * len(missed), strict=True):
            priced[k] = ms
            if t is not None:
                found[k] = t
    for k, (i, name, _, scale) in enumerate(fallbacks):
        out[i][name] = out[i].get(name, 0.0) + sum(priced[k].values()) * scale
        if tiers is not None:
            tiers[i] |= found[k]


def p2p_latency(nbytes, spec) -> float:
    """Pipeline-stage hand-off (ms): the activation over the inter-node link plus its latency, as 0.12.0 prices it
    (for any stage placement)."""
    return float((np.asarray(nbytes, dtype=np.float64) / spec.inter_node_bw + spec.p2p_latency) * 1000.0)
