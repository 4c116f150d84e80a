"""Per-tensor activation quantisation, elementwise (tables computescale_perf, scale_matrix_perf).

compute_scale: s = max|x| / qmax (abs + reduction). scale_matrix: q = cast(clamp(round(x / s))).
"""

from __future__ import annotations

from perfledger.collector.ops import OpContext, UnsupportedCase

QMAX = {"int8": 127.0, "fp8": 448.0}


def _numpy(op: str, case: dict, ctx: OpContext) -> tuple[str, float]:
    import numpy as np

    if case["quant_dtype"] != "int8":
        raise UnsupportedCase(f"numpy has no {case['quant_dtype']} dtype")
    x = np.random.default_rng(0).standard_normal((int(case["m"]), int(case["k"])), dtype=np.float32)
    scratch = np.empty_like(x)
    q = np.empty(x.shape, dtype=np.int8)
    scale = np.float32(np.abs(x).max() / QMAX["int8"])

    def compute_scale():
        np.abs(x, out=scratch)
        return scratch.max() / QMAX["int8"]

    def scale_matrix():
        np.multiply(x, 1.0 / scale, out=scratch)
        np.rint(scratch, out=scratch)
        np.clip(scratch, -QMAX["int8"], QMAX["int8"], out=scratch)
        q[...] = scratch

    fn = {"compute_scale": compute_scale, "scale_matrix": scale_matrix}[op]
    return "numpy_ufunc", ctx.backend.time_ms(fn, warmup=ctx.warmup, runs=ctx.runs)


def _torch(op: str, case: dict, ctx: OpContext) -> tuple[str, float]:
    import torch

    qdtype = {"int8": torch.int8, "fp8": getattr(torch, "float8_e4m3fn", None)}[case["quant_dtype"]]
    if qdtype is None:
        raise UnsupportedCase(f"torch {torch.__version__} has no float8_e4m3fn")
    qmax = QMAX[case["quant_dtype"]]
    dev = ctx.backend.torch_device(ctx.device)
    x = torch.randn(int(case["m"]), int(case["k"]), device=dev, dtype=torch.bfloat16)
    scale = x.abs().amax().float() / qmax

    def compute_scale():
        return x.abs().amax().float() / qmax

    def scale_matrix():
        y = (x.float() / scale).clamp(-qmax, qmax)
        return (y.round() if qdtype is torch.int8 else y).to(qdtype)

    fn = {"compute_scale": compute_scale, "scale_matrix": scale_matrix}[op]
    return "torch_ops", ctx.backend.time_ms(fn, warmup=ctx.warmup, runs=ctx.runs)


IMPLS = {"cpu": _numpy, "torch": _torch}


if __name__ == "__main__":
    from perfledger.collector.direct import main

    raise SystemExit(main("compute_scale"))
