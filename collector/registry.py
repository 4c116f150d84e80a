"""Op registry: which module measures an op, which staging table it feeds, and where it may run."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

ISOLATIONS = ("inline", "subprocess")


class RegistryError(ValueError):
    """The registry YAML or a request against it is invalid."""


@dataclass(frozen=True)
class BackendGate:
    """Where an op may run on one backend: allowed dtypes, framework version range, minimum SM."""

    dtypes: tuple[str, ...]
    min_version: str | None = None
    max_version: str | None = None
    min_sm: int | None = None


@dataclass(frozen=True)
class OpEntry:
    """One registered op: `module.IMPLS[backend](op, case, ctx)` measures a case (kernel, latency ms)."""

    op: str
    module: str
    table: str
    cases: str
    dtype_field: str
    isolation: str
    timeout_s: float
    backends: dict[str, BackendGate] = field(default_factory=dict)

    @property
    def perf_filename(self) -> str:
        return f"{self.table}.txt"


@dataclass(frozen=True)
class Registry:
    ops: dict[str, OpEntry]
    dtype_min_sm: dict[str, int]

    def get(self, op: str) -> OpEntry:
        if op not in self.ops:
            raise RegistryError(f"unknown op {op!r}; registered ops: {', '.join(sorted(self.ops))}")
        return self.ops[op]

    def ops_for(self, backend: str) -> list[str]:
        return [name for name, entry in self.ops.items() if backend in entry.backends]


def _require(mapping: dict, key: str, where: str) -> Any:
    if key not in mapping:
        raise RegistryError(f"registry.yaml: {where}: missing key {key!r}")
    return mapping[key]


def parse_registry(doc: dict, source: str = "registry.yaml") -> Registry:
    """Build a Registry from the parsed YAML, naming the op and key of any defect."""
    if not isinstance(doc, dict) or not isinstance(doc.get("ops"), dict):
        raise RegistryError(f"{source}: top-level key 'ops' must be a mapping")
    ops: dict[str, OpEntry] = {}
    for name, spec in doc["ops"].items():
        where = f"ops.{name}"
        if not isinstance(spec, dict):
            raise RegistryError(f"{source}: {where} must be a mapping")
        isolation = spec.get("isolation", "inline")
        if isolation not in ISOLATIONS:
            raise RegistryError(f"{source}: {where}.isolation={isolation!r}; expected one of {ISOLATIONS}")
        gates = {}
        for backend, gate in (_require(spec, "backends", where) or {}).items():
            gate = gate or {}
            unknown = set(gate) - {"dtypes", "min_version", "max_version", "min_sm"}
            if unknown:
                raise RegistryError(f"{source}: {where}.backends.{backend}: unknown keys {sorted(unknown)}")
            gates[backend] = BackendGate(
                dtypes=tuple(_require(gate, "dtypes", f"{where}.backends.{backend}")),
                min_version=gate.get("min_version"),
                max_version=gate.get("max_version"),
                min_sm=gate.get("min_sm"),
            )
        ops[name] = OpEntry(
            op=name,
            module=_require(spec, "module", where),
            table=_require(spec, "table", where),
            cases=_require(spec, "cases", where),
            dtype_field=_require(spec, "dtype_field", where),
            isolation=isolation,
            timeout_s=float(spec.get("timeout_s", 600)),
            backends=gates,
        )
    return Registry(ops=ops, dtype_min_sm=dict(doc.get("dtype_min_sm") or {}))


@lru_cache(maxsize=1)
def load_registry() -> Registry:
    text = resources.files("perfledger.collector").joinpath("registry.yaml").read_text()
    return parse_registry(yaml.safe_load(text))


def _vtuple(text: str) -> Any:
    from packaging.version import Version

    return Version(str(text).split("+", 1)[0])


def gate_reason(entry: OpEntry, backend: str, version: str, sm: int | None) -> str | None:
    """Why `entry` cannot run on this backend runtime, or None when it can."""
    gate = entry.backends.get(backend)
    if gate is None:
        return f"op {entry.op} is not registered for backend {backend!r}"
    if gate.min_version and _vtuple(version) < _vtuple(gate.min_version):
        return f"op {entry.op} needs {backend} >= {gate.min_version}, runtime is {version}"
    if gate.max_version and _vtuple(version) >= _vtuple(gate.max_version):
        return f"op {entry.op} needs {backend} < {gate.max_version}, runtime is {version}"
    if gate.min_sm is not None and sm is not None and sm < gate.min_sm:
        return f"op {entry.op} needs SM >= {gate.min_sm}, device is SM {sm}"
    return None
