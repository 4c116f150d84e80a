"""Backend registry: name -> class (base + one module per engine)."""

from __future__ import annotations

from generator.backends.base import Backend, Launch
from generator.backends.sglang import SglangBackend
from generator.backends.trtllm import TrtllmBackend
from generator.backends.vllm import VllmBackend
from generator.mapping import load_mapping

REGISTRY: dict[str, type[Backend]] = {cls.name: cls for cls in (VllmBackend, SglangBackend, TrtllmBackend)}


def get_backend(name: str) -> Backend:
    return REGISTRY[name](load_mapping())


__all__ = ["Backend", "Launch", "REGISTRY", "get_backend"]
