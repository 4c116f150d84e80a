"""Kimi-K3 static parity helpers: 0.12.0's run_static / per-op breakdown and the per-op comparison."""

from __future__ import annotations

import pytest

K3 = "moonshotai/Kimi-K3"


def reference(oracle, system: str, backend: str, version: str, ref_kw: dict, shape: dict):
    """(ttft_ms, decode_ms summed over osl − 1 steps, {phase: [(name, ms, _, tier), ...]}) from 0.12.0."""
    engine = oracle.EngineHandle.compile(K3, system, backend, backend_version=version, **ref_kw)
    ref_shape = dict(batch_size=shape["batch"], isl=shape["isl"], osl=shape["osl"])
    ttft, gen_ms, _ = engine.run_static(**ref_shape)
    ctx, gen = engine.run_static_per_op(**ref_shape)[:2]
    return ttft, gen_ms, {"context": ctx, "generation": gen}


def assert_same_ops(ours: dict, ref, osl: int, rel: float) -> None:
    """Same op set per phase (pipeline p2p aside), every op within `rel`, TTFT and TPOT within 1e-9."""
    ttft, gen_ms, phases = ref
    for phase, ref_ops in phases.items():
        want = {name.removeprefix(f"{phase}_"): ms for name, ms, *_ in ref_ops if name != f"{phase}_p2p"}
        assert set(want) == set(ours[phase]), f"{phase}: op sets differ {set(want) ^ set(ours[phase])}"
        for name, ms in want.items():
            assert ours[phase][name] == pytest.approx(ms, rel=rel), f"{phase} {name}"
    assert ours["ttft_ms"] == pytest.approx(ttft, rel=1e-9)
    assert ours["tpot_ms"] == pytest.approx(gen_ms / (osl - 1), rel=1e-9)
