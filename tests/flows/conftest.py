"""Fixtures for flow tests: one Prefect test server per worker, small real sources from ../shared."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import yaml


@pytest.fixture(scope="session")
def prefect_server():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=60):
        yield


GEMM = Path("h200_sxm") / "gemm" / "vllm"


def write_config(path: Path, **values) -> Path:
    """A pipeline config YAML from keyword values (paths as strings)."""
    path.write_text(yaml.safe_dump({k: (str(v) if isinstance(v, Path) else v) for k, v in values.items()}))
    return path


def scaled_copy(shared_tree: Path, target_root: Path, version: str, factor: float) -> Path:
    """A published-tree copy of h200 vllm gemm `version` with every latency multiplied by `factor`."""
    src = shared_tree / GEMM / version
    dst = target_root / GEMM / version
    dst.mkdir(parents=True, exist_ok=True)
    frame = pl.read_parquet(src / "gemm_perf.parquet")
    frame.with_columns(pl.col("latency") * factor).write_parquet(dst / "gemm_perf.parquet")
    (dst / "collection_meta.yaml").write_text((src / "collection_meta.yaml").read_text())
    return target_root
