"""Static energy / power of whole deployments vs aiconfigurator-core 0.12.0 on ../shared's h200 vLLM 0.22.0 (its GEMM,
attention and MoE tables hold power; norms and collectives do not).

0.12.0 reads ../shared's tree through a systems folder beside the wheel's system YAMLs. Per op: its
`run_static_per_op` energies (0 where no power prices an op; ours omits those). Totals: its static estimate's
summary (per-phase and end-to-end average power, the power coverage) and the gated `power_w`.
"""

from __future__ import annotations

import pytest

from tests.estimator.conftest import SHARED_DATA

pytestmark = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="needs ../shared's perf tree")

WHERE = ("h200_sxm", "vllm", "0.22.0")
SHAPE = {"batch": 8, "isl": 4000, "osl": 200}
# DeepSeek-V3: its decode MoE is an `overlap` of the routed and the shared-expert streams (energy of both)
# (model, (tp, moe_tp, moe_ep), the fewest ops that must be priced from measured power)
DEPLOYMENTS = [("Qwen/Qwen3-30B-A3B", (2, 1, 2), 10), ("Qwen/Qwen3-32B", (2, 1, 1), 10),
               ("deepseek-ai/DeepSeek-V3", (8, 1, 8), 9)]


@pytest.fixture
def unlisted(monkeypatch):
    monkeypatch.setenv("AIC_ALLOW_UNLISTED_VERSIONS", "1")


def _reference_summary(model, par, systems, monkeypatch):
    """0.12.0's static estimate over `systems` (its search path, and the engine's env default, restored after)."""
    from aiconfigurator.cli.api import cli_estimate
    from aiconfigurator_core.sdk import perf_database

    monkeypatch.setenv("AICONFIGURATOR_SYSTEMS_PATH", systems)
    before = perf_database.get_systems_paths()
    perf_database.set_systems_paths([systems])
    try:
        tp, moe_tp, moe_ep = par
        return cli_estimate(model, WHERE[0], mode="static", backend_name=WHERE[1], backend_version=WHERE[2],
                            isl=SHAPE["isl"], osl=SHAPE["osl"], batch_size=SHAPE["batch"], tp_size=tp,
                            moe_tp_size=moe_tp, moe_ep_size=moe_ep)
    finally:
        perf_database.set_systems_paths(before)


@pytest.mark.parametrize("model,par,powered", DEPLOYMENTS, ids=[m for m, *_ in DEPLOYMENTS])
def test_static_energy_matches_reference(model, par, powered, shared_est, oracle, shared_systems, unlisted, monkeypatch):
    from perfledger.estimator.static import Deploy, static

    tp, moe_tp, moe_ep = par
    ours = static(shared_est, model, Deploy(*WHERE, tp=tp, moe_tp=moe_tp, moe_ep=moe_ep), **SHAPE)
    energy = ours["energy"]
    engine = oracle.EngineHandle.compile(model, WHERE[0], WHERE[1], backend_version=WHERE[2], systems_path=shared_systems,
                                         tp_size=tp, moe_tp_size=moe_tp, moe_ep_size=moe_ep)
    per_op = engine.run_static_per_op(batch_size=SHAPE["batch"], isl=SHAPE["isl"], osl=SHAPE["osl"])[:2]
    priced = 0
    for phase, ref_ops in zip(("context", "generation"), per_op, strict=True):
        for name, ms, wms, _ in ref_ops:
            op = name.removeprefix(f"{phase}_")
            if op == "p2p":
                continue
            assert ours[phase][op] == pytest.approx(ms, rel=1e-9), f"{phase} {op} latency"
            assert energy[phase]["ops_wms"].get(op, 0.0) == pytest.approx(wms, rel=1e-9), f"{phase} {op} energy"
            priced += wms > 0
    assert priced >= powered

    ref = _reference_summary(model, par, shared_systems, monkeypatch)
    summary = ref.summary
    assert ours["ttft_ms"] == pytest.approx(ref.ttft, rel=1e-9)
    assert energy["context"]["power_w"] == pytest.approx(summary.get_context_power_avg(), rel=1e-9)
    assert energy["generation"]["power_w"] == pytest.approx(summary.get_generation_power_avg(), rel=1e-9)
    assert energy["power_avg_w"] == pytest.approx(summary.get_e2e_power_avg(), rel=1e-9)
    assert energy["power_coverage"] == pytest.approx(summary.get_power_data_coverage(), rel=1e-9)
    assert (energy["power_w"] is None) == (ref.power_w is None)
    if ref.power_w is not None:
        assert energy["power_w"] == pytest.approx(ref.power_w, rel=1e-9)


def test_narrow_projection_gemms_carry_their_measured_energy(shared_est, oracle, shared_systems, unlisted):
    """Qwen3.5's GDN b/a projection (n = 2 x value heads, a `below_grid_sol` GEMM) answered from collected rows has
    their power, in both phases, as 0.12.0's; only an n below the grid (the roofline) has none."""
    from perfledger.estimator.static import Deploy, static

    model = "Qwen/Qwen3.5-35B-A3B"
    ours = static(shared_est, model, Deploy(*WHERE, tp=2, moe_tp=2), **SHAPE)
    engine = oracle.EngineHandle.compile(model, WHERE[0], WHERE[1], backend_version=WHERE[2], systems_path=shared_systems,
                                         tp_size=2, moe_tp_size=2, moe_ep_size=1)
    per_op = engine.run_static_per_op(batch_size=SHAPE["batch"], isl=SHAPE["isl"], osl=SHAPE["osl"])[:2]
    for phase, ref_ops in zip(("context", "generation"), per_op, strict=True):
        (ms, wms), = [(ms, wms) for name, ms, wms, _ in ref_ops if name == f"{phase}_gdn_in_proj_ba_gemm"]
        assert wms > 0 and ours[phase]["gdn_in_proj_ba_gemm"] == pytest.approx(ms, rel=1e-9)
        assert ours["energy"][phase]["ops_wms"]["gdn_in_proj_ba_gemm"] == pytest.approx(wms, rel=1e-9)


def test_static_energy_is_null_without_power(wheel_est):
    """The wheel's h200 vLLM 0.24.0 tables hold no power column: no op carries energy, the report is null."""
    from perfledger.estimator.static import Deploy, static

    ours = static(wheel_est, "Qwen/Qwen3-32B", Deploy("h200_sxm", "vllm", "0.24.0", tp=2), batch=1, isl=128, osl=2)
    assert ours["energy"] is None
