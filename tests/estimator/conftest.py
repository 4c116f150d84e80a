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
