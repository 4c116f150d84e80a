"""Project-wide test fixtures: where the real data lives (../shared and the installed wheel)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings

# Timing is not what property tests check: CI shares 2 cores with other jobs, so a per-example deadline
# only turns load into flaky failures.
settings.register_profile("shared-cores", deadline=None)
settings.load_profile("shared-cores")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = (REPO_ROOT / ".." / "shared").resolve()
SHARED_TREE = SHARED / "aic" / "perfdb-095f58a" / "systems" / "data"
SHARED_CAMPAIGN = SHARED / "collected" / "vllm-0.20.0-campaign"

# The reference data is only read when named (perfledger.settings): the tests name ../shared.
os.environ.setdefault("PERFLEDGER_REFERENCE_DATA", str(SHARED))
os.environ.setdefault("PREFECT_HOME", str(REPO_ROOT / "var" / "prefect-tests"))
Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)  # Prefect makes only the last folder
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


@pytest.fixture(scope="session")
def aic_core() -> ModuleType:
    """aiconfigurator-core, the parity oracle and wheel data: the `aic` extra `make test` installs, so never a skip."""
    try:
        return importlib.import_module("aiconfigurator_core")
    except ImportError:
        pytest.fail("aiconfigurator-core is not installed: `pip install -e '.[aic,dask,test]'` (what `make test` runs)")


@pytest.fixture(scope="session")
def shared_tree() -> Path:
    if not SHARED_TREE.is_dir():
        pytest.fail(f"real data missing: {SHARED_TREE} (../shared must sit beside the repo)")
    return SHARED_TREE


@pytest.fixture(scope="session")
def shared_campaign() -> Path:
    if not SHARED_CAMPAIGN.is_dir():
        pytest.fail(f"real data missing: {SHARED_CAMPAIGN}")
    return SHARED_CAMPAIGN
