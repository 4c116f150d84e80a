"""Torch backend: torch kernels on one visible GPU, timed with CUDA events. Import-guarded: no torch or no
CUDA raises BackendUnavailable with the reason instead of failing at import.

`device_type="cpu"` runs the same op code on torch's CPU build (used to test the torch kernels where no
GPU exists); it is not a registered backend.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perfledger.collector.backends.base import Backend, BackendUnavailable
from perfledger.collector.backends.cpu import _cpu_model


def _torch(device_type: str = "cuda"):
    try:
        import torch
    except ImportError as exc:
        raise BackendUnavailable(f"torch backend: torch is not installed ({exc})") from exc
    if device_type == "cuda" and not torch.cuda.is_available():
        raise BackendUnavailable(f"torch backend: torch {torch.__version__} sees no CUDA device")
    return torch


@dataclass
class TorchBackend(Backend):
    name: str = "torch"
    framework: str = "torch"
    device_type: str = "cuda"

    @property
    def cuda(self) -> bool:
        return self.device_type == "cuda"

    def torch_device(self, device: int):
        torch = _torch(self.device_type)
        return torch.device("cuda", device) if self.cuda else torch.device("cpu")

    def version(self) -> str:
        return _torch(self.device_type).__version__.split("+", 1)[0]

    def device_ids(self) -> list[int]:
        return list(range(_torch().cuda.device_count())) if self.cuda else [0]

    def device_name(self, device: int) -> str:
        return _torch().cuda.get_device_name(device) if self.cuda else _cpu_model()

    def sm_version(self, device: int) -> int | None:
        if not self.cuda:
            return None
        major, minor = _torch().cuda.get_device_capability(device)
        return major * 10 + minor

    def extra_versions(self) -> dict[str, str]:
        torch = _torch(self.device_type)
        return {"torch_version": torch.__version__, "cuda_version": str(torch.version.cuda)}

    def time_ms(self, fn: Callable[[], Any], *, warmup: int, runs: int) -> float:
        """Median of per-call CUDA-event times after warm-up (device time, not launch overhead)."""
        if not self.cuda:
            return super().time_ms(fn, warmup=warmup, runs=runs)
        torch = _torch()
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        samples = []
        for _ in range(runs):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
        return statistics.median(samples)


def load() -> TorchBackend:
    _torch()
    return TorchBackend()
