"""Backend registry: name -> class (base + one module per engine)."""

from __future__ import annotations

from perfledger.generator.backends.base import Backend, Launch
from perfledger.generator.backends.sglang import SglangBackend
from perfledger.generator.backends.trtllm import TrtllmBackend
from perfledger.generator.backends.vllm import VllmBackend
from perfledger.generator.mapping import load_mapping

REGISTRY: dict[str, type[Backend]] = {cls.name: cls for cls in (VllmBackend, SglangBackend, TrtllmBackend)}


def get_backend(name: str) -> Backend:
    return REGISTRY[name](load_mapping())


__all__ = ["Backend", "Launch", "REGISTRY", "get_backend"]
