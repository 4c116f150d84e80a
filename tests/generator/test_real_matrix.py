"""Real data: every backend version in the public support matrix renders, or is refused clearly."""

import csv
from pathlib import Path

import pytest
from packaging.version import Version

from perfledger.generator.errors import GeneratorError
from perfledger.generator.mapping import load_mapping

from .conftest import minimal, render

MATRIX = Path(__file__).resolve().parents[2] / ".." / "shared" / "aic" / "support_matrix" / "head-095f58a"


def _listed() -> list[tuple[str, str, str]]:
    rows = set()
    for path in sorted(MATRIX.glob("*.csv")):
        with path.open(newline="") as handle:
            rows |= {(r["Backend"], r["Version"], r["Mode"]) for r in csv.DictReader(handle)}
    return sorted(rows)


def test_support_matrix_is_present():
    assert len(_listed()) >= 20, f"expected the public support matrix under {MATRIX}"


def test_every_listed_matrix_version_renders_or_is_refused_clearly():
    mapping = load_mapping()
    refused = []
    for backend, version, mode in _listed():
        known = mapping.backends[backend]["versions"]
        try:
            out = render(minimal(backend, mode), version=version)
        except GeneratorError as exc:
            assert Version(version) < min(Version(v) for v in known), (backend, version, exc)
            assert "older than every version with flag data" in exc.message
            refused.append((backend, version))
            continue
        assert out.mode == mode
        exact = version in known
        assert exact == (not any("no exact flag data" in w for w in out.warnings)), (backend, version)
    # The Kimi-K3 preview build (0.1.dev19262, FAIL in the matrix) is refused, never floored silently.
    assert ("vllm", "0.1.dev19262") in refused


@pytest.mark.parametrize("version", ["0.5.10rc0", "0.5.16"])
def test_sglang_versions_between_data_points_use_the_floor(version):
    out = render(minimal("sglang", "disagg"), version=version)
    assert any("no exact flag data for sglang" in w for w in out.warnings)
