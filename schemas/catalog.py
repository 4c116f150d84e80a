"""The perf-table catalog (schemas/catalog.yaml) as typed, validated objects."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import polars as pl
import yaml

CATALOG_PATH = Path(__file__).with_name("catalog.yaml")
_TYPES = {"int": pl.Int64, "str": pl.String, "float": pl.Float64, "bool": pl.Boolean}
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
MAX_NAME_CHARS = 100
_UNIT_TO_MS = {"ms": None, "us": 1e-3}


class CatalogError(ValueError):
    """The catalog or a name checked against it is wrong."""


@dataclass(frozen=True)
class TableSpec:
    """One perf table: what one row is (a shape measured once) and how its columns behave."""

    name: str
    family: str
    keys: dict[str, pl.DataType]
    metrics: dict[str, str]
    optional: frozenset[str] = frozenset()
    renames: dict[str, str] = field(default_factory=dict)
    latency_may_be_nonpositive: bool = False
    legacy_without_descriptive: bool = False
    may_be_zero: frozenset[str] = frozenset()

    @property
    def time_metrics(self) -> list[str]:
        """Metric columns that hold a duration (ms or µs)."""
        return [m for m, unit in self.metrics.items() if unit in _UNIT_TO_MS]

    @property
    def microsecond_metrics(self) -> list[str]:
        return [m for m, unit in self.metrics.items() if unit == "us"]

    @property
    def primary_metric(self) -> str:
        """The duration that represents the row (latency when present)."""
        times = self.time_metrics
        return "latency" if "latency" in times else times[0]

    @property
    def required_columns(self) -> list[str]:
        return [c for c in [*self.keys, *self.metrics] if c not in self.optional]


@dataclass(frozen=True)
class Catalog:
    """All tables plus the shared vocabularies (systems, backends, framework labels, enums)."""

    tables: dict[str, TableSpec]
    descriptive: tuple[str, ...]
    identity: tuple[str, ...]
    systems: frozenset[str]
    backends: frozenset[str]
    framework_labels: dict[str, str]
    enums: dict[str, tuple[str, ...]]

    def table(self, name: str) -> TableSpec:
        try:
            return self.tables[name]
        except KeyError:
            raise CatalogError(f"unknown table {name!r}: not in {CATALOG_PATH.name}") from None

    def check_system(self, system: str) -> str:
        check_safe_name(system, "system")
        if system not in self.systems:
            raise CatalogError(f"unknown system {system!r}; known: {', '.join(sorted(self.systems))}")
        return system

    def check_backend(self, backend: str) -> str:
        check_safe_name(backend, "backend")
        if backend not in self.backends:
            raise CatalogError(f"unknown backend {backend!r}; known: {', '.join(sorted(self.backends))}")
        return backend

    def normalise_framework(self, label: str | None) -> str | None:
        """Map a framework label of any casing (SGLang, vLLM, wideep_sglang) to the backend name."""
        if label is None:
            return None
        return self.framework_labels.get(label.strip().lower(), label.strip().lower())


def check_safe_name(value: str, what: str) -> str:
    """Names become path components: the whole name must match (a trailing newline is refused too), with
    no separators, `..` or odd characters, and at most MAX_NAME_CHARS characters."""
    if not isinstance(value, str) or len(value) > MAX_NAME_CHARS or not _SAFE_NAME.fullmatch(value) or ".." in value:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:60] + f"... ({len(value)} chars)"
        raise CatalogError(f"invalid {what} name {shown}: use letters, digits, '.', '_', '+', '-' (no '/' or '..'), "
                           f"at most {MAX_NAME_CHARS} characters")
    return value


def _table_spec(name: str, raw: dict) -> TableSpec:
    try:
        keys = {k: _TYPES[t] for k, t in raw["keys"].items()}
        metrics = dict(raw["metrics"])
        family = raw["family"]
    except KeyError as exc:
        raise CatalogError(f"{CATALOG_PATH.name}: table {name!r} lacks {exc}") from None
    unknown = set(metrics.values()) - {"ms", "us", "W", "GB/s"}
    if unknown:
        raise CatalogError(f"{CATALOG_PATH.name}: table {name!r} has unknown units {sorted(unknown)}")
    return TableSpec(
        name=name,
        family=family,
        keys=keys,
        metrics=metrics,
        optional=frozenset(raw.get("optional", ())),
        renames=dict(raw.get("renames", {})),
        latency_may_be_nonpositive=bool(raw.get("latency_may_be_nonpositive", False)),
        legacy_without_descriptive=bool(raw.get("legacy_without_descriptive", False)),
        may_be_zero=frozenset(raw.get("may_be_zero", ())),
    )


@lru_cache(maxsize=4)
def load_catalog(path: Path = CATALOG_PATH) -> Catalog:
    """Parse and check the catalog once per process."""
    raw = yaml.safe_load(Path(path).read_text())
    tables = {name: _table_spec(name, spec) for name, spec in raw["tables"].items()}
    return Catalog(
        tables=tables,
        descriptive=tuple(raw["descriptive"]),
        identity=tuple(raw["identity"]),
        systems=frozenset(raw["systems"]),
        backends=frozenset(raw["backends"]),
        framework_labels={k.lower(): v for k, v in raw["framework_labels"].items()},
        enums={k: tuple(map(str, v)) for k, v in raw["enums"].items()},
    )
