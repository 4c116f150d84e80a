"""BLAS thread settings for the estimator commands, applied before numpy is first imported."""

from __future__ import annotations

import os

# The variables OpenBLAS reads for its thread count, highest priority first.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def without_blas_threads() -> None:
    """Load numpy without OpenBLAS's worker threads: they start one per core and spin, and the estimator's numpy
    work is elementwise (no matrix products), so they only burn CPU, ~0.15 s of a cold `perfledger plan` on 2
    cores. A thread count the user already set through any of OpenBLAS's variables is left alone."""
    if not any(name in os.environ for name in THREAD_VARIABLES):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
