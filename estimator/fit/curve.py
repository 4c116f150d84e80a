"""1-D measured curves (MoE token axis, comm message-size axis): exact, lerp inside, SOL ratio outside.

Outside the collected range the edge point's latency is scaled by SOL(query) / SOL(edge); a
single-point curve queried below its point is a miss (nothing to bracket, no scale-down anchor).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def eval_curve(xs: np.ndarray, lats: np.ndarray, x: np.ndarray, sol: Callable[[np.ndarray], np.ndarray]):
    """Latency at each x and a miss mask; xs strictly increasing, lats the first-kept measurements."""
    xs = np.asarray(xs, dtype=np.float64)
    lats = np.asarray(lats, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    out = np.full(len(x), np.nan)
    pos = np.searchsorted(xs, x, side="left")
    safe = np.minimum(pos, len(xs) - 1)
    exact = xs[safe] == x
    out[exact] = lats[safe[exact]]
    inside = ~exact & (pos > 0) & (pos < len(xs))
    lo, hi = pos[inside] - 1, pos[inside]
    out[inside] = lats[lo] + (lats[hi] - lats[lo]) * (x[inside] - xs[lo]) / (xs[hi] - xs[lo])
    above = ~exact & (pos >= len(xs))
    below = ~exact & (pos == 0)
    if len(xs) == 1:
        below[:] = False
    for mask, edge in ((above, len(xs) - 1), (below, 0)):
        if mask.any():
            out[mask] = lats[edge] * sol(x[mask]) / sol(np.array([xs[edge]]))[0]
    return out, np.isnan(out)
