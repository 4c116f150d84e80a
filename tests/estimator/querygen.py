"""Query generators for parity tests: on-grid, off-grid, interpolated and beyond-range shapes."""

from __future__ import annotations

import numpy as np


def gemm_queries(rng: np.random.Generator, grid_n, grid_k, count: int):
    """Half the n/k values on the collected grid, half log-uniform in [8, 400k]; m log-uniform to 200k."""
    m = np.exp(rng.uniform(0, np.log(200_000), count)).astype(np.int64)
    off = lambda: np.exp(rng.uniform(np.log(8), np.log(400_000), count)).astype(np.int64)  # noqa: E731
    n = np.where(rng.random(count) < 0.5, rng.choice(grid_n, count), off())
    k = np.where(rng.random(count) < 0.5, rng.choice(grid_k, count), off())
    return m, n, k
