"""Both DSA module ops (context and generation) at one query, ours against aiconfigurator-core 0.12.0's op handle:
shared by the GLM-5 and DeepSeek-V3.2 module parity tests, which differ only in architecture and query mix."""

from __future__ import annotations

import pytest

from perfledger.estimator.batch import estimate_one
from perfledger.estimator.errors import NoDataError


def compare_dsa_modules(wheel_est, oracle, handle, where: dict, q: dict, *, architecture: str, index_topk_freq: int,
                        check_sol: bool) -> int:
    """`q`: kv, gemm, heads, batch, isl, prefix, seq, frac. Both sides miss, or agree within 1e-6 (and the SOL within
    1e-9 when `check_sol`); returns how many of the two ops were answered."""
    from aiconfigurator_core.sdk import common
    from aiconfigurator_core.sdk.operations import ContextDSAModule, GenerationDSAModule

    dsa = dict(index_topk_freq=index_topk_freq, dsa_full_layer_fraction=q["frac"], architecture=architecture)
    kv, gemm = common.KVCacheQuantMode[q["kv"]], common.GEMMQuantMode[q["gemm"]]
    cases = [(ContextDSAModule("a", 1.0, q["heads"], kv, common.FMHAQuantMode.bfloat16, gemm, cp_size=1, **dsa),
              dict(is_context=True, batch_size=q["batch"], s=q["isl"], prefix=q["prefix"], x=q["batch"] * q["isl"]),
              "dsa_context_module", dict(isl=q["isl"], prefix=q["prefix"])),
             (GenerationDSAModule("g", 1.0, q["heads"], kv, gemm, **dsa),
              dict(is_context=False, batch_size=q["batch"], s=q["seq"], x=q["batch"]), "dsa_generation_module",
              dict(seq=q["seq"]))]
    answered = 0
    for op, kw, name, cols in cases:
        ops = oracle.build([op])
        try:
            ref = handle.evaluate_ops_json(ops, **kw)[0][1]
        except Exception as exc:  # the reference's typed miss
            assert "PerfDataNotAvailable" in type(exc).__name__, exc
            ref = None
        query = dict(**where, architecture=architecture, kv_quant=q["kv"], gemm_quant=q["gemm"], heads=q["heads"],
                     batch=q["batch"], full_frac=q["frac"], **cols)
        try:
            ours = estimate_one(wheel_est, name, **query)
        except NoDataError:
            ours = None
        assert (ours is None) == (ref is None), f"one-sided miss {name} {query} ours={ours} ref={ref}"
        if ref is not None:
            answered += 1
            assert ours["latency_ms"] == pytest.approx(ref, rel=1e-6), f"{name} {query}"
            if check_sol:
                assert ours["sol_ms"] == pytest.approx(handle.evaluate_ops_sol_json(ops, **kw)[0][1], rel=1e-9)
    return answered
