"""Backends: where and with what library cases are measured. Name -> module; each exposes `load() -> Backend`."""

from __future__ import annotations

from importlib import import_module

from perfledger.collector.backends.base import Backend, BackendUnavailable

BACKENDS = {"cpu": "perfledger.collector.backends.cpu", "torch": "perfledger.collector.backends.torch_cuda"}


def get_backend(name: str) -> Backend:
    """Instantiate a backend; BackendUnavailable says why it cannot run here (e.g. no CUDA)."""
    if name not in BACKENDS:
        raise BackendUnavailable(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}")
    return import_module(BACKENDS[name]).load()


__all__ = ["BACKENDS", "Backend", "BackendUnavailable", "get_backend"]
