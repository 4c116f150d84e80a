"""Shared fixtures: the installed wheel's perf tree (parity oracle data) and ../shared."""

from __future__ import annotations

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
