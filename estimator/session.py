"""The estimator session: one PerfSource plus memoised per-slice structures (tables, sites, util grids)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from perfledger import settings
from perfledger.estimator.data.sources import PerfSource, TreeSource, WarehouseSource
from perfledger.estimator.data.system_specs import SystemSpec, load_spec
from perfledger.estimator.errors import EstimatorError, NoDataError


class _Miss:
    """A remembered typed miss (memo value)."""

    def __init__(self, exc: EstimatorError):
        self.exc = exc


class Estimator:
    """Holds the data source; ops ask it for resolved tables and cache what they build from them."""

    def __init__(self, source: PerfSource):
        self.source = source
        self._memo: dict = {}

    def spec(self, system: str) -> SystemSpec:
        return load_spec(system)

    def memo(self, key: tuple, build: Callable):
        """Build once per key (e.g. ("gemm_sites", system, backend, version, quant)).

        A typed miss is remembered too: the matrix builder asks the same missing slice many times,
        and re-resolving it (every donor and earlier version) each time dominated its run.
        """
        if key not in self._memo:
            try:
                self._memo[key] = build()
            except EstimatorError as exc:
                self._memo[key] = _Miss(exc)
        hit = self._memo[key]
        if isinstance(hit, _Miss):
            raise hit.exc.with_traceback(None)
        return hit

    def table(self, system: str, backend: str, version: str, table: str, *, shared: bool, dedupe: bool = True):
        """Resolved rows of a perf table (shared=True: own + donors + earlier versions, first wins)."""
        return self.memo(
            ("table", system, backend, version, table, shared, dedupe),
            lambda: self.source.resolve(system, backend, version, table, shared=shared, dedupe=dedupe),
        )


def open_source(data: str | None, warehouse: str | None = None) -> PerfSource:
    """CLI/data selection: `--data PATH|aic-package` reads a public tree, otherwise the warehouse."""
    if data is None:
        return WarehouseSource(warehouse)
    if data == "aic-package":
        package = settings.aic_package_dir()
        if package is None:
            raise NoDataError("--data aic-package: aiconfigurator-core is not installed (pip extra 'aic')")
        return TreeSource(package / "systems" / "data")
    path = Path(data)
    if (path / "data").is_dir() and not (path / "h200_sxm").exists():
        path = path / "data"
    return TreeSource(path)
