"""Op registry: shipped entries resolve to real modules and real catalog tables; gates; bad input."""

from __future__ import annotations

from importlib import import_module

import pytest
import yaml

from perfledger.collector.registry import RegistryError, gate_reason, load_registry, parse_registry
from tests.collector.conftest import SHARED


def _catalog_tables() -> set[str]:
    doc = yaml.safe_load((SHARED / "aic" / "catalogs" / "op_backend_catalog.yaml").read_text())
    tables: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "op_files" and isinstance(value, list):
                    tables.update(v for v in value if isinstance(v, str))
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(doc)
    return tables


@pytest.mark.parametrize("op", sorted(load_registry().ops))
def test_shipped_op_resolves(op):
    entry = load_registry().get(op)
    assert set(entry.backends) <= set(import_module(entry.module).IMPLS)
    assert entry.table in _catalog_tables(), f"{entry.table} is not a public perf table (ingest would reject it)"
    assert "cpu" in entry.backends


def test_unknown_op_lists_known():
    with pytest.raises(RegistryError, match="unknown op 'nope'; registered ops: .*gemm"):
        load_registry().get("nope")


@pytest.mark.parametrize("spec, needle", [
    ({"ops": {"x": {"table": "t", "cases": "c", "dtype_field": "d", "backends": {}}}}, "ops.x: missing key 'module'"),
    ({"ops": {"x": {"module": "m", "table": "t", "cases": "c", "dtype_field": "d", "isolation": "fork",
                    "backends": {}}}}, "ops.x.isolation='fork'"),
    ({"ops": {"x": {"module": "m", "table": "t", "cases": "c", "dtype_field": "d",
                    "backends": {"cpu": {"dtypes": ["a"], "min_sm_x": 3}}}}}, "ops.x.backends.cpu: unknown keys"),
    ({"ops": {"x": {"module": "m", "table": "t", "cases": "c", "dtype_field": "d",
                    "backends": {"cpu": {"min_sm": 3}}}}}, "ops.x.backends.cpu: missing key 'dtypes'"),
    ({"op": {}}, "top-level key 'ops'"),
])
def test_bad_registry(spec, needle):
    with pytest.raises(RegistryError) as err:
        parse_registry(spec)
    assert needle in str(err.value)


def test_gates():
    reg = parse_registry({"ops": {"g": {"module": "m", "table": "t", "cases": "c", "dtype_field": "d", "backends": {
        "torch": {"dtypes": ["bf16"], "min_version": "2.1", "max_version": "3.0", "min_sm": 80}}}}})
    entry = reg.get("g")
    assert gate_reason(entry, "torch", "2.4.0+cu124", 90) is None
    assert "needs torch >= 2.1" in gate_reason(entry, "torch", "2.0.1", 90)
    assert "needs torch < 3.0" in gate_reason(entry, "torch", "3.1", 90)
    assert "needs SM >= 80" in gate_reason(entry, "torch", "2.4", 75)
    assert "not registered for backend 'cpu'" in gate_reason(entry, "cpu", "2.4", None)
