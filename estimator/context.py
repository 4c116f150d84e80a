"""Estimator: one PerfSource plus memoised per-slice structures (tables, sites, util grids)."""

from __future__ import annotations

from typing import Callable

from estimator.sources import PerfSource
from estimator.specs import SystemSpec, load_spec


class Estimator:
    """Holds the data source; ops ask it for resolved tables and cache what they build from them."""

    def __init__(self, source: PerfSource):
        self.source = source
        self._memo: dict = {}

    def spec(self, system: str) -> SystemSpec:
        return load_spec(system)

    def memo(self, key: tuple, build: Callable):
        """Build once per key (e.g. ("gemm_sites", system, backend, version, quant))."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    def table(self, system: str, backend: str, version: str, table: str, *, shared: bool, dedupe: bool = True):
        """Resolved rows of a perf table (shared=True: own + donors + earlier versions, first wins)."""
        return self.memo(
            ("table", system, backend, version, table, shared, dedupe),
            lambda: self.source.resolve(system, backend, version, table, shared=shared, dedupe=dedupe),
        )


def open_source(data: str | None, warehouse: str | None = None) -> PerfSource:
    """CLI/data selection: `--data PATH|aic-package` reads a public tree, otherwise the warehouse."""
    from pathlib import Path

    from estimator.sources import TreeSource, WarehouseSource
    from estimator.specs import wheel_systems_dir

    if data is None:
        return WarehouseSource(warehouse)
    if data == "aic-package":
        root = wheel_systems_dir()
        if root is None:
            from estimator.errors import NoDataError

            raise NoDataError("--data aic-package: aiconfigurator-core is not installed (pip extra 'aic')")
        return TreeSource(root / "data")
    path = Path(data)
    if (path / "data").is_dir() and not (path / "h200_sxm").exists():
        path = path / "data"
    return TreeSource(path)
