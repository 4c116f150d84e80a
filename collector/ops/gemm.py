"""GEMM op: C[m,n] = A[m,k] @ B[k,n] into a preallocated output (table gemm_perf)."""

from __future__ import annotations

from perfledger.collector.ops import OpContext

TORCH_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32"}


def _numpy(op: str, case: dict, ctx: OpContext) -> tuple[str, float]:
    import numpy as np

    from perfledger.collector.backends.cpu import blas_name

    m, n, k = int(case["m"]), int(case["n"]), int(case["k"])
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.dtype(case["gemm_dtype"]))
    b = rng.standard_normal((k, n), dtype=np.dtype(case["gemm_dtype"]))
    c = np.empty((m, n), dtype=a.dtype)
    ms = ctx.backend.time_ms(lambda: np.matmul(a, b, out=c), warmup=ctx.warmup, runs=ctx.runs)
    return f"numpy_{blas_name()}", ms


def _torch(op: str, case: dict, ctx: OpContext) -> tuple[str, float]:
    import torch

    dtype = getattr(torch, TORCH_DTYPES[case["gemm_dtype"]])
    dev = ctx.backend.torch_device(ctx.device)
    m, n, k = int(case["m"]), int(case["n"]), int(case["k"])
    a = torch.randn(m, k, device=dev, dtype=dtype)
    b = torch.randn(n, k, device=dev, dtype=dtype).t()  # weight stored [n,k] like nn.Linear
    c = torch.empty(m, n, device=dev, dtype=dtype)
    ms = ctx.backend.time_ms(lambda: torch.matmul(a, b, out=c), warmup=ctx.warmup, runs=ctx.runs)
    return "torch_matmul", ms


IMPLS = {"cpu": _numpy, "torch": _torch}


if __name__ == "__main__":
    from perfledger.collector.direct import main

    raise SystemExit(main("gemm"))
