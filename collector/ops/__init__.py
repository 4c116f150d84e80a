"""Op modules: each exposes `IMPLS = {backend: fn(op, case, ctx) -> (kernel_source, latency_ms)}` and a Mode 1
`__main__` (`python -m perfledger.collector.ops.<op> --device 0 --out DIR`)."""

from __future__ import annotations

from dataclasses import dataclass

from perfledger.collector.backends.base import Backend


@dataclass(frozen=True)
class OpContext:
    """What an op needs to measure one case: the backend, the local device index and the timing plan."""

    backend: Backend
    device: int
    warmup: int
    runs: int


class UnsupportedCase(ValueError):
    """The backend has no kernel for this case (classified as kernel_limit)."""


def dispatch(impls: dict, op: str, case: dict, ctx: OpContext):
    """Pick the backend implementation of an op; a missing one is an unsupported case, not a crash."""
    impl = impls.get(ctx.backend.name)
    if impl is None:
        raise UnsupportedCase(f"op {op}: backend {ctx.backend.name!r} not supported (have {sorted(impls)})")
    return impl(op, case, ctx)
