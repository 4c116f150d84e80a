"""MLA absorbed-weight batched GEMM, one batch per head (table mla_bmm_perf).

mla_gen_pre: q_nope[h,T,128] @ W_UK[h,128,512]; mla_gen_post: o[h,T,512] @ W_UV[h,512,128].
"""

from __future__ import annotations

from perfledger.collector.ops import OpContext

SHAPES = {"mla_gen_pre": (128, 512), "mla_gen_post": (512, 128)}


def _dims(case: dict) -> tuple[int, int, int, int]:
    k, n = SHAPES[case["op_name"]]
    return int(case["num_heads"]), int(case["num_tokens"]), k, n


def _numpy(op: str, case: dict, ctx: OpContext) -> tuple[str, float]:
    import numpy as np

    from perfledger.collector.backends.cpu import blas_name

    h, t, k, n = _dims(case)
    rng = np.random.default_rng(0)
    dtype = np.dtype(case["bmm_dtype"])
    a, b = rng.standard_normal((h, t, k), dtype=dtype), rng.standard_normal((h, k, n), dtype=dtype)
    c = np.empty((h, t, n), dtype=dtype)
    ms = ctx.backend.time_ms(lambda: np.matmul(a, b, out=c), warmup=ctx.warmup, runs=ctx.runs)
    return f"numpy_{blas_name()}", ms


def _torch(op: str, case: dict, ctx: OpContext) -> tuple[str, float]:
    import torch

    h, t, k, n = _dims(case)
    dev, dtype = ctx.backend.torch_device(ctx.device), getattr(torch, case["bmm_dtype"])
    a, b = torch.randn(h, t, k, device=dev, dtype=dtype), torch.randn(h, k, n, device=dev, dtype=dtype)
    c = torch.empty(h, t, n, device=dev, dtype=dtype)
    ms = ctx.backend.time_ms(lambda: torch.bmm(a, b, out=c), warmup=ctx.warmup, runs=ctx.runs)
    return "torch_bmm", ms


IMPLS = {"cpu": _numpy, "torch": _torch}


if __name__ == "__main__":
    from perfledger.collector.direct import main

    raise SystemExit(main("mla_bmm"))
