"""The torch kernels of every op, run on torch's CPU build when torch is installed (no GPU needed).

The CUDA path (device placement, CUDA-event timing, SM floors) needs a GPU and is checked by hand.
"""

from __future__ import annotations

from importlib import import_module

import pytest

from perfledger.collector.backends.torch_cuda import TorchBackend
from perfledger.collector.ops import OpContext, dispatch
from perfledger.collector.registry import load_registry

torch = pytest.importorskip("torch")

SMALL = {"gemm": {"m": 4, "n": 64, "k": 32}, "mla_bmm": {"op_name": "mla_gen_post", "num_tokens": 3, "num_heads": 2},
         "compute_scale": {"m": 8, "k": 64}, "scale_matrix": {"m": 8, "k": 64}}
CASES = [(op, dtype) for op, entry in sorted(load_registry().ops.items()) for dtype in entry.backends["torch"].dtypes]


@pytest.mark.parametrize("op, dtype", CASES)
def test_torch_kernels_run_on_cpu(op, dtype):
    entry = load_registry().get(op)
    ctx = OpContext(backend=TorchBackend(device_type="cpu"), device=0, warmup=1, runs=3)
    case = {**SMALL[op], entry.dtype_field: dtype}
    kernel, latency = dispatch(import_module(entry.module).IMPLS, op, case, ctx)
    assert kernel.startswith("torch_") and latency > 0


def test_cpu_variant_runtime_info():
    info = TorchBackend(device_type="cpu").runtime_info(0)
    assert info["framework"] == "torch" and info["sm_version"] is None
    assert info["version"] == torch.__version__.split("+", 1)[0]
