"""Where perf rows come from: a public-layout tree or the warehouse, behind one PerfSource interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import cache
from pathlib import Path

from perfledger.estimator.errors import NoDataError
from perfledger.safe_io import data_yaml
from perfledger.versions import earlier_versions

TABLES_YAML = Path(__file__).with_name("tables.yaml")


@cache
def table_catalog() -> dict:
    """tables.yaml: table name -> {family, keys, shared_layer}."""
    return data_yaml(TABLES_YAML)


def table_info(table: str) -> dict:
    catalog = table_catalog()
    if table not in catalog:
        raise KeyError(f"{TABLES_YAML.name}: no entry for table {table!r}")
    return catalog[table]


class PerfSource(ABC):
    """Reads one perf table of one (system, backend, version); subclasses only know storage."""

    @abstractmethod
    def read(self, system: str, backend: str, version: str, table: str):
        """Rows of exactly this version folder (a polars frame, possibly empty), never None."""

    @abstractmethod
    def versions(self, system: str, family: str, backend: str) -> list[str]:
        """Version folders present for (system, family, backend)."""

    def reuse_donors(self, system: str, family: str, backend: str, version: str) -> dict[str, str]:
        """table -> donor version declared by the version's reuse.yaml (none by default)."""
        return {}

    def describe(self) -> str:
        return type(self).__name__

    def holding_versions(self, system: str, backend: str, table: str) -> list[str]:
        """The versions of this system and backend with rows of `table` (a miss names them: the data may sit at a
        newer version than the one asked, which back-fill never reads)."""
        family = table_info(table)["family"]
        return [v for v in self.versions(system, family, backend) if self.holds(system, backend, v, table)]

    def holds(self, system: str, backend: str, version: str, table: str) -> bool:
        """Whether one version has rows of `table` (a source with a cheaper test than reading them overrides it)."""
        return self.read(system, backend, version, table).height > 0

    def manifest_dir(self) -> Path | None:
        """Folder holding this data's perf_data_reuse_manifest.yaml, if it has its own (none by default)."""
        return None

    def resolve(self, system: str, backend: str, version: str, table: str, *, shared: bool = True, dedupe: bool = True):
        """Priority-ordered union (own, reuse donors, earlier versions nearest first, then the rows other
        frameworks lend through the reuse manifest: data/cross_backend.py), first key wins.

        `shared=False` (EMPIRICAL/SOL, or tables outside the shared layer) reads the own version only.
        `dedupe=False` leaves repeated keys for callers that first split the rows into kernel pools.
        `_source_version` keeps each row's lineage ("<version>", or "<framework>/<version>" when lent).
        """
        import polars as pl

        info = table_info(table)
        family = info["family"]
        order = [version]
        if shared and info.get("shared_layer", True):
            donor = self.reuse_donors(system, family, backend, version).get(table)
            if donor:
                order.append(donor)
            order += [v for v in earlier_versions(version, self.versions(system, family, backend)) if v not in order]
        frames = []
        for rank, ver in enumerate(order):
            df = self.read(system, backend, ver, table)
            if df.height:
                df = complete_columns(df, table, f"{system}/{backend}/{ver}")
                frames.append(df.with_columns(pl.lit(rank).alias("_source_rank"), pl.lit(ver).alias("_source_version")))
        if shared and info.get("shared_layer", True):
            from perfledger.estimator.data.cross_backend import lent_frames

            frames += [complete_columns(df, table, f"{system}/{backend}/{version} (lent rows)")
                       for df in lent_frames(self, system, backend, table, family)]
        if not frames:
            elsewhere = [v for v in self.holding_versions(system, backend, table) if v not in order]
            raise NoDataError(
                f"no {table} rows for {system}/{backend}/{version} in {self.describe()} (looked in {', '.join(order)}"
                + (" and the reuse manifest's lenders)" if shared and info.get("shared_layer", True) else ")")
                + (f"; {system}/{backend} holds them at {', '.join(elsewhere)}" if elsewhere else "")
            )
        merged = pl.concat(frames, how="diagonal_relaxed")
        return first_wins(merged, table) if dedupe else merged


def complete_columns(df, table: str, where: str):
    """Apply the table's declared `column_defaults` (tables.yaml) where a file lacks the column, or a warehouse row
    holds null for it (the curated table unions files with and without it); a key column still missing is a
    typed error naming table, slice and column (older collections predate e.g. window_size)."""
    import polars as pl

    info = table_info(table)
    defaults = info.get("column_defaults") or {}
    df = df.with_columns(pl.col(c).fill_null(v) if c in df.columns else pl.lit(v).alias(c) for c, v in defaults.items())
    missing = [c for c in info["keys"] if c not in df.columns]
    if missing:
        raise NoDataError(f"{table} rows for {where} lack key column(s) {', '.join(missing)} "
                          f"(no column_defaults for them in {TABLES_YAML.name})")
    return df


def first_wins(df, table: str):
    """Drop repeated measurement keys, keeping the first row in priority/file order."""
    return df.unique(subset=table_info(table)["keys"], keep="first", maintain_order=True)


class TreeSource(PerfSource):
    """Public layout: <root>/<system>/<family>/<backend>/<version>/<table>.parquet (+ reuse.yaml)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        if not self.root.is_dir():
            raise NoDataError(f"perf data root {self.root} is not a directory")

    def describe(self) -> str:
        return str(self.root)

    def manifest_dir(self) -> Path:
        """The public layout keeps the manifest beside the data tree: <systems>/data → <systems>/."""
        return self.root.parent

    def _dir(self, system: str, family: str, backend: str, version: str) -> Path:
        return self.root / system / family / backend / version

    def read(self, system, backend, version, table):
        import polars as pl

        path = self._dir(system, table_info(table)["family"], backend, version) / f"{table}.parquet"
        if not path.is_file():
            return pl.DataFrame()
        try:
            df = pl.read_parquet(path)
        except Exception as exc:  # corrupt file: name it
            raise NoDataError(f"{path}: unreadable parquet ({exc})") from exc
        return df.with_columns(pl.col(pl.String).cast(pl.String))

    def holds(self, system, backend, version, table):
        return (self._dir(system, table_info(table)["family"], backend, version) / f"{table}.parquet").is_file()

    def versions(self, system, family, backend):
        base = self.root / system / family / backend
        return sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []

    def reuse_donors(self, system, family, backend, version):
        path = self._dir(system, family, backend, version) / "reuse.yaml"
        if not path.is_file():
            return {}
        doc = data_yaml(path) or {}
        entries = doc.get("reuse")
        if not isinstance(entries, list):
            raise ValueError(f"{path}: top-level 'reuse' must be a list")
        donors = {}
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or "table" not in entry or "from_version" not in entry:
                raise ValueError(f"{path}: reuse[{i}] needs keys 'table' and 'from_version'")
            donors.setdefault(str(entry["table"]).removesuffix(".parquet"), str(entry["from_version"]))
        return donors


class WarehouseSource(PerfSource):
    """Curated warehouse tables (warehouse.store.Warehouse.read_curated); lineage columns dropped.

    Rows, reuse donors and version lists are cached per instance: the matrix builder asks the same
    slices thousands of times. Every ingest commits to the `batches` table, so its Delta version is the
    cache key; a new commit empties the cache.
    """

    LINEAGE = ("system", "family", "backend", "row_version", "batch_id", "source_file", "source_row", "ingested_at")

    def __init__(self, root: Path | str | None = None, as_of=None):
        from perfledger.warehouse.paths import resolve_root
        from perfledger.warehouse.store import Warehouse

        self.root = resolve_root(None if root is None else str(root))
        self.wh = Warehouse(self.root)
        self.as_of = as_of
        self._cache: dict = {}
        self._stamp: int | None = None

    def describe(self) -> str:
        """Not the root: miss messages are stored (matrix cells, estimates), and stored rows name no location."""
        return "the warehouse"

    def manifest_dir(self) -> Path | None:
        """A manifest beside a local warehouse's tables, as its reuse table sits with them (else cross_backend's
        fallbacks; an object-store warehouse has none beside it)."""
        return self.root if isinstance(self.root, Path) else None

    def batches_version(self) -> int | None:
        """Latest commit of the `batches` table (no table open per lookup)."""
        return self.wh.latest_commit("batches")

    def _cached(self, key: tuple, build):
        stamp = self.batches_version()
        if stamp != self._stamp:
            self._cache.clear()
            self._stamp = stamp
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    def _rows(self, table: str, system: str, backend: str):
        def build():
            import polars as pl

            if table not in self.wh.curated_tables():
                return pl.DataFrame()
            df = self.wh.read_curated(table, system=system, backend=backend, as_of=self.as_of)
            return df.sort(["source_file", "source_row"]) if df.height else df

        return self._cached(("rows", table, system, backend), build)

    def read(self, system, backend, version, table):
        import polars as pl

        df = self._rows(table, system, backend)
        if not df.height:
            return df
        df = df.filter(pl.col("version") == version)
        return df.drop([c for c in self.LINEAGE if c in df.columns])

    def _reuse(self) -> dict[tuple, dict[str, str]]:
        """(system, family, backend, version) -> {table: donor version}, first declaration wins."""

        def build():
            if not self.wh.has_table("reuse"):
                return {}
            donors: dict[tuple, dict[str, str]] = {}
            cols = ("system", "family", "backend", "version", "table", "from_version")
            for system, family, backend, version, table, donor in self.wh.read_table("reuse").select(cols).iter_rows():
                slot = donors.setdefault((system, family, backend, version), {})
                slot.setdefault(str(table).removesuffix(".parquet"), str(donor))
            return donors

        return self._cached(("reuse",), build)

    def reuse_donors(self, system, family, backend, version):
        return dict(self._reuse().get((system, family, backend, version), {}))

    def versions(self, system, family, backend):
        def build():
            found: set[str] = set()
            for t, info in table_catalog().items():
                if info["family"] == family:
                    df = self._rows(t, system, backend)
                    if df.height:
                        found |= set(df["version"].unique().to_list())
            return sorted(found)

        return list(self._cached(("versions", system, family, backend), build))
