"""The catalog covers every real table, and the contracts built from it accept real rows and reject bad ones."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from perfledger.schemas.catalog import CatalogError, check_safe_name, load_catalog
from perfledger.schemas.contracts import catalog_models, validate_rows
from perfledger.warehouse.discover import aic_package_root

CATALOG = load_catalog()


def _real_files(root: Path) -> list[Path]:
    return sorted(root.glob("*/*/*/*/*.parquet"))


@pytest.mark.parametrize("root_name", ["shared", "wheel"])
def test_every_real_table_resolves_to_its_catalog_entry_and_family(root_name: str, shared_tree: Path) -> None:
    root = shared_tree if root_name == "shared" else aic_package_root()
    seen = set()
    for path in _real_files(root):
        spec = CATALOG.table(path.stem)
        assert spec.family == path.parts[-4], path
        columns = set(pq.read_schema(path).names)
        renamed = {spec.renames.get(c, c) for c in columns}
        assert set(spec.required_columns) <= renamed, (path, set(spec.required_columns) - renamed)
        unknown = renamed - set(spec.keys) - set(spec.metrics) - set(CATALOG.descriptive)
        assert not unknown, (path, unknown)
        seen.add(path.stem)
    assert len(seen) >= 44


def test_catalog_vocabularies() -> None:
    assert len(CATALOG.tables) == 45 and len(catalog_models()) == 45
    assert CATALOG.normalise_framework("vLLM") == "vllm" and CATALOG.normalise_framework("wideep_sglang") == "sglang"
    assert CATALOG.table("wideep_deepep_ll_perf").microsecond_metrics == ["combine_avg_t_us", "dispatch_avg_t_us"]
    assert CATALOG.table("computescale_perf").latency_may_be_nonpositive
    with pytest.raises(CatalogError, match="unknown table 'nope_perf'"):
        CATALOG.table("nope_perf")
    for bad in ["../x", "a/b", "", "..", ".hidden", "x y"]:
        with pytest.raises(CatalogError, match="invalid"):
            check_safe_name(bad, "system")


def _gemm(**overrides) -> pl.DataFrame:
    row = {"framework": "SGLang", "version": "0.5.14", "device": "H200", "op_name": "gemm", "kernel_source": "ks",
           "gemm_dtype": "fp8", "m": 1, "n": 2, "k": 3, "latency": 0.1, "power": None, "power_limit": None}
    row.update(overrides)
    return pl.DataFrame([row], schema={**{c: pl.String for c in ("framework", "version", "device", "op_name",
                                                                 "kernel_source", "gemm_dtype")},
                                       "m": pl.Int64, "n": pl.Int64, "k": pl.Int64, "latency": pl.Float64,
                                       "power": pl.Float64, "power_limit": pl.Float64})


@pytest.mark.parametrize("overrides, check, column", [
    ({"latency": -1.0}, "greater_than(0)", "latency"),
    ({"latency": float("inf")}, "finite", "latency"),
    ({"m": -4}, "greater_than_or_equal_to(0)", "m"),
    ({"m": None}, "not_nullable", "m"),
    ({"kernel_source": "  "}, "not_blank", "kernel_source"),
    ({"power": -3.0}, "greater_than_or_equal_to(0)", "power"),
])
def test_contract_failures_name_check_and_column(overrides: dict, check: str, column: str) -> None:
    spec = CATALOG.table("gemm_perf")
    findings = validate_rows(spec, _gemm(**overrides))
    errors = findings.filter(pl.col("severity") == "error").select("check", "column").rows()
    assert errors == [(check, column)]


def test_unknown_enum_values_are_warnings_not_errors() -> None:
    findings = validate_rows(CATALOG.table("gemm_perf"), _gemm(gemm_dtype="fp6_magic"))
    assert findings.select("severity", "column", "value").rows() == [("warning", "gemm_dtype", "fp6_magic")]


def test_delta_tables_accept_zero_and_negative_latency() -> None:
    spec = CATALOG.table("computescale_perf")
    frame = pl.DataFrame({"framework": ["v"], "version": ["1"], "device": ["d"], "op_name": ["compute_scale"],
                          "kernel_source": ["k"], "m": [1], "k": [2], "quant_dtype": ["fp8"], "latency": [-0.002],
                          "power": [None], "power_limit": [None]},
                         schema_overrides={"power": pl.Float64, "power_limit": pl.Float64})
    assert validate_rows(spec, frame).is_empty()


@pytest.mark.parametrize("root_name", ["shared", "wheel"])
def test_measured_power_columns_pass_the_contracts(root_name: str, shared_tree: Path) -> None:
    """Every real table holding `power` / `power_limit` (the estimator's energy source) lists them as metrics and its
    rows raise no contract error (the first 2,000 rows of each file)."""
    root = shared_tree if root_name == "shared" else aic_package_root()
    held = [p for p in _real_files(root) if "power" in pq.read_schema(p).names]
    assert held
    for path in held:
        spec = CATALOG.table(path.stem)
        assert {"power", "power_limit"} <= set(spec.metrics) & set(spec.optional), path
        findings = validate_rows(spec, pl.read_parquet(path, n_rows=2000))
        assert findings.filter(pl.col("severity") == "error").is_empty(), path
