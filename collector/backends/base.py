"""Backend base: runtime identity (framework, version, device, SM) and a median timer."""

from __future__ import annotations

import platform
import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class BackendUnavailable(RuntimeError):
    """The backend's library or hardware is missing on this machine."""


@dataclass
class Backend:
    """Base for backends. Subclasses set `name`/`framework` and override the device hooks and `time_ms`."""

    name: str = "base"
    framework: str = "base"
    default_system: str | None = None

    def version(self) -> str:
        raise NotImplementedError

    def device_ids(self) -> list[int]:
        raise NotImplementedError

    def device_name(self, device: int) -> str:
        raise NotImplementedError

    def sm_version(self, device: int) -> int | None:
        return None

    def runtime_info(self, device: int) -> dict[str, Any]:
        """Runtime facts for collection_meta.yaml (framework, versions, device, SM, host)."""
        return {
            "framework": self.framework,
            "backend": self.name,
            "version": self.version(),
            "device": self.device_name(device),
            "sm_version": self.sm_version(device),
            "host": socket.gethostname(),
            "python": platform.python_version(),
            **self.extra_versions(),
        }

    def extra_versions(self) -> dict[str, str]:
        return {}

    def worker_env(self, n_workers: int) -> dict[str, str]:
        """Environment for pool workers (set before kernel libraries load)."""
        return {}

    def time_ms(self, fn: Callable[[], Any], *, warmup: int, runs: int) -> float:
        """Median wall time of `runs` calls after `warmup` calls, in milliseconds."""
        for _ in range(warmup):
            fn()
        samples = []
        for _ in range(runs):
            start = time.perf_counter_ns()
            fn()
            samples.append((time.perf_counter_ns() - start) / 1e6)
        return statistics.median(samples)
