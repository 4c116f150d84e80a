"""Shared fixtures: the installed wheel's perf tree (parity oracle data) and ../shared."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / ".." / "shared"
SHARED_DATA = SHARED / "aic" / "perfdb-095f58a" / "systems" / "data"


@pytest.fixture(scope="session")
def wheel_est(aic_core):
    """Estimator over the aiconfigurator-core wheel's systems/data (same data as the oracle)."""
    from perfledger.estimator.session import Estimator, open_source

    return Estimator(open_source("aic-package"))


@pytest.fixture(scope="session")
def shared_est():
    from perfledger.estimator.data.sources import TreeSource
    from perfledger.estimator.session import Estimator

    return Estimator(TreeSource(SHARED_DATA))


@pytest.fixture(scope="session")
def shared_systems(tmp_path_factory, aic_core) -> str:
    """A systems folder through which 0.12.0 reads ../shared's perf tree: the wheel's system files beside it as data/."""
    from perfledger import settings

    root = tmp_path_factory.mktemp("shared_systems")
    for item in (settings.aic_package_dir() / "systems").iterdir():
        if item.name != "data":
            (root / item.name).symlink_to(item)
    (root / "data").symlink_to(SHARED_DATA.resolve())
    return str(root)


@pytest.fixture(scope="session")
def oracle(aic_core):
    """The reference estimator as a black box (parity tests only)."""
    from tests.estimator.oracle import Oracle

    return Oracle()


@pytest.fixture(scope="module")
def sweep(aic_core):
    """The whole-model sweep tool (benchmarks/static_parity.py; benchmarks/ is no package): its deployment runner
    and classifier, shared by the tests that pin its draws."""
    spec = importlib.util.spec_from_file_location("static_parity", REPO / "benchmarks" / "static_parity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sweep_deployment(model, kind, system, backend, version, tp, moe_tp, moe_ep, batch, isl, osl, mode) -> dict:
    """One deployment in the sweep's own shape (as its draws print)."""
    return {"model": model, "kind": kind, "system": system, "backend": backend, "version": version, "tp": tp,
            "moe_tp": moe_tp, "moe_ep": moe_ep, "batch": batch, "isl": isl, "osl": osl, "mode": mode}


ENGINE_QUANT = {"gemm": "gemm_quant_mode", "moe": "moe_quant_mode", "kv": "kvcache_quant_mode", "fmha": "fmha_quant_mode"}


def assert_static_matches_engine(est, oracle, model: str, system: str, backend: str, version: str, par: tuple,
                                 shape: tuple, quants: dict[str, str]) -> None:
    """Our static estimate against 0.12.0's compiled static engine at one deployment: the same op set per phase, every
    op within 1e-6, TTFT and TPOT within 1e-9. `par`: (tp, moe_tp, moe_ep); `shape`: (batch, isl, osl); `quants`:
    gemm / moe / kv [/ fmha] -> quant (the rest the engine's and our defaults)."""
    from perfledger.estimator.static import Deploy, static

    (tp, moe_tp, moe_ep), (batch, isl, osl) = par, shape
    ours = static(est, model, Deploy(system, backend, version, tp=tp, moe_tp=moe_tp, moe_ep=moe_ep,
                                     **{f"{q}_quant": v for q, v in quants.items()}), batch=batch, isl=isl, osl=osl)
    engine = oracle.EngineHandle.compile(model, system, backend, backend_version=version, tp_size=tp, moe_tp_size=moe_tp,
                                         moe_ep_size=moe_ep, **{ENGINE_QUANT[q]: v for q, v in quants.items()})
    assert_static_equals_compiled(ours, engine, shape, op_rel=1e-6)


def assert_static_equals_compiled(ours: dict, engine, shape: tuple, op_rel: float) -> None:
    """Our static answer against a compiled 0.12.0 engine's at `shape` (batch, isl, osl): the same op set per phase
    (p2p aside), every op within `op_rel`, TTFT and TPOT within 1e-9."""
    batch, isl, osl = shape
    ref_shape = dict(batch_size=batch, isl=isl, osl=osl)
    ttft, gen_ms, _ = engine.run_static(**ref_shape)
    ctx_ops, gen_ops = engine.run_static_per_op(**ref_shape)[:2]
    for phase, ref_ops in (("context", ctx_ops), ("generation", gen_ops)):
        ref = {name.removeprefix(f"{phase}_"): ms for name, ms, *_ in ref_ops if name != f"{phase}_p2p"}
        assert set(ref) == set(ours[phase]), f"{phase}: op sets differ {set(ref) ^ set(ours[phase])}"
        for name, ms in ref.items():
            assert ours[phase][name] == pytest.approx(ms, rel=op_rel), f"{phase} {name}"
    assert ours["ttft_ms"] == pytest.approx(ttft, rel=1e-9)
    assert ours["tpot_ms"] == pytest.approx(gen_ms / (osl - 1), rel=1e-9)
