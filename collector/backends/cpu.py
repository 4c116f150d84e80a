"""CPU backend: numpy (BLAS) kernels measured with wall-clock time; devices are logical slots."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

from perfledger.collector.backends.base import Backend


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def blas_name() -> str:
    """Name of the BLAS numpy was built against (the kernel that actually runs a matmul)."""
    import numpy as np

    try:
        return np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    except Exception:  # noqa: BLE001 - older numpy without mode="dicts"
        return "blas"


@dataclass
class CpuBackend(Backend):
    name: str = "cpu"
    framework: str = "numpy"
    default_system: str | None = "cpu_local"

    def version(self) -> str:
        import numpy as np

        return np.__version__

    def device_ids(self) -> list[int]:
        return [0]

    def device_name(self, device: int) -> str:
        return _cpu_model()

    def worker_env(self, n_workers: int) -> dict[str, str]:
        """Split the cores between workers: oversubscribed BLAS threads spin and distort every timing."""
        threads = str(max(1, (os.cpu_count() or 1) // max(1, n_workers)))
        return {"OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}

    def extra_versions(self) -> dict[str, str]:
        return {"blas": blas_name(), "cpu_count": str(os.cpu_count())}


def load() -> CpuBackend:
    return CpuBackend()
