"""Quant-transfer reference selection: xshape, then pooled same-profile xquant, then xprofile.

Used only when the query quant has no own-slice data. The order is lexicographic on
(relation rank, profile distance, slice-feature distance); file order breaks remaining ties.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from perfledger.estimator.quant.profiles import profile_distance, quant_profile


def feature_distance(a: Sequence[float], b: Sequence[float], span: np.ndarray | float = 1.0) -> float:
    """Squared distance in log features, each axis divided by its span over the candidate pool."""
    a, b = np.log(np.asarray(a, dtype=np.float64)), np.log(np.asarray(b, dtype=np.float64))
    return float((((a - b) / span) ** 2).sum())


def log_spans(features: list[Sequence[float]]) -> np.ndarray:
    """Per-axis max - min of log features over a pool (zero spans become 1); the query is not clamped."""
    logs = np.log(np.asarray(features, dtype=np.float64))
    span = logs.max(axis=0) - logs.min(axis=0)
    span[span == 0] = 1.0
    return span


def pick_reference(
    family: str,
    quant: str,
    candidates: list[tuple[str, Sequence[float]]],
    query_features: Sequence[float],
    grid_for: Callable[[str, Sequence[float] | None, bool], object],
):
    """Choose the reference slice; returns (grid, label, ref_quant) or None.

    candidates: (quant, slice features) in table order; grid_for(quant, features, same_profile) builds
    that slice's util grid (SOL priced with the query quant when same_profile); for xprofile the
    features are None and the caller picks the quant's slice. xshape candidates are the same-quant ones.
    """
    qprof = quant_profile(family, quant).profile
    tiers = [
        ("xshape", [c for c in candidates if c[0] == quant]),
        ("xquant", [c for c in candidates if c[0] != quant and quant_profile(family, c[0]).profile == qprof]),
    ]
    for label, pool in tiers:
        best = None
        span = log_spans([f for _, f in pool]) if pool else 1.0
        for cand_quant, feats in pool:
            grid = grid_for(cand_quant, feats, True)
            if grid is None:
                continue
            d = feature_distance(feats, query_features, span)
            if best is None or d < best[0]:
                best = (d, grid, label, cand_quant)
        if best is not None:
            return best[1], best[2], best[3]
    others = []
    for cand_quant, _ in candidates:
        prof = quant_profile(family, cand_quant).profile
        if prof != qprof and cand_quant not in others:
            others.append(cand_quant)
    others.sort(key=lambda c: profile_distance(family, quant_profile(family, c).profile, qprof))
    for cand_quant in others:
        grid = grid_for(cand_quant, None, False)
        if grid is not None:
            return grid, "xprofile", cand_quant
    return None
