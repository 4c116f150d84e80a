"""Delta Lake storage: curated perf tables, auxiliary tables, atomic slice replacement, time travel.

Layout under the root: `curated/<table>/` (one Delta table per perf table, partitioned by
system/backend/version) and `<name>/` for everything else (batches, quarantine, ledger tables, ...).
Every write is one Delta commit, so a reader sees a table either before or after it, never half; writes
inside `Warehouse.unit()` become visible together (warehouse.journal), and readers honour an open unit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import polars as pl
from deltalake import CommitProperties, DeltaTable, WriterProperties, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from perfledger.schemas.catalog import check_safe_name
from perfledger.settings import Location, ObjectLocation, location
from perfledger.warehouse import objects
from perfledger.warehouse.journal import Journal, log_version, pinned_versions

SLICE_COLUMNS = ("system", "backend", "version")
COMMIT_LABEL = "perfledger."  # prefix of the labels a commit carries in its Delta commitInfo (`perfledger versions`)
AsOf = int | str | datetime | None


class WarehouseError(RuntimeError):
    """A warehouse table is missing or cannot be read or written."""


class WarehouseConflict(WarehouseError):
    """Another writer committed to the same table at the same time and Delta refused this commit."""


def _write_error(uri: Location, exc: Exception) -> WarehouseError:
    if isinstance(exc, CommitFailedError):
        reason = str(exc).splitlines()[0]
        return WarehouseConflict(f"warehouse table {uri.name} at {uri} is busy: another writer committed to it at the "
                                 f"same time ({reason}); nothing of this write was committed, try again")
    return WarehouseError(f"cannot write warehouse table {uri.name} at {uri}: {exc}")


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def slice_predicate(slices: Iterable[Sequence[object]], columns: Sequence[str]) -> str:
    """SQL predicate matching any of the given column-value tuples (for predicate overwrite/delete)."""
    clauses = sorted({
        "(" + " AND ".join(f"{c} = {_literal(v)}" for c, v in zip(columns, values, strict=True)) + ")"
        for values in slices
    })
    return " OR ".join(clauses) if clauses else "FALSE"


class Warehouse:
    """A warehouse root. Cheap to construct; tables are opened on use.

    The root is a local folder (a Path) or a place on object storage (an ObjectLocation, from a
    `s3://...`-like string): Delta tables are opened through deltalake's storage layer with the
    location's storage options, the other objects through warehouse.objects.

    `write_observer`, when set, is called with the target of every write just before it happens (a
    progress or audit seam; the fault-injection tests fail writes through it).
    """

    def __init__(self, root: Path | str | ObjectLocation):
        self.root: Location = location(root)
        self.write_observer: Callable[[Location], None] | None = None
        self._unit: Journal | None = None
        self._labels: dict[str, str] = {}

    # -- the commit unit ---------------------------------------------------------------------------
    @contextmanager
    def unit(self) -> Iterator[None]:
        """Make every write inside one all-or-nothing commit (hold the run lock; see warehouse.journal).

        This instance sees its own writes at once; every other reader sees them when the block ends
        without an exception. An exception rolls the tables back to their versions before the block.
        """
        if self._unit is not None:
            raise WarehouseError(f"warehouse {self.root}: a commit unit is already open")
        if isinstance(self.root, Path):
            self.root.mkdir(parents=True, exist_ok=True)
        journal = self._unit = Journal.begin(self.root)
        try:
            yield
        except BaseException as exc:
            self._unit = None
            try:
                journal.roll_back()
            except OSError as rollback_error:  # the journal stays: the next writer rolls back
                exc.add_note(f"rollback incomplete ({rollback_error}); the next write to {self.root} finishes it")
            raise
        self._unit = None
        journal.commit()

    @property
    def storage_options(self) -> dict[str, str] | None:
        """What deltalake needs to reach the root (None on local disk)."""
        return self.root.storage_options if isinstance(self.root, ObjectLocation) else None

    @contextmanager
    def labelled(self, operation: str, batches: Iterable[str] = ()) -> Iterator[None]:
        """Every commit inside the block records what made it (an operation and the batch ids it wrote) in
        its commitInfo, so a table's history says which batch made each version."""
        previous = self._labels
        self._labels = {f"{COMMIT_LABEL}operation": operation, f"{COMMIT_LABEL}batches": ",".join(sorted(set(batches)))}
        try:
            yield
        finally:
            self._labels = previous

    def _commit_properties(self) -> CommitProperties | None:
        return CommitProperties(custom_metadata=dict(self._labels)) if self._labels else None

    def before_writing(self, target: Location) -> None:
        """Every table write announces its target: the open unit records the table's version first."""
        if self.write_observer is not None:
            self.write_observer(target)
        if self._unit is not None:
            self._unit.record_table(target)

    def before_creating(self, folders: list[Location]) -> None:
        """Folders written outside Delta (raw input copies) are announced too, so a rollback removes them."""
        for folder in folders:
            if self.write_observer is not None:
                self.write_observer(folder)
        if self._unit is not None:
            self._unit.record_folders(folders)

    def _pins(self) -> dict[str, int | None]:
        """Versions other writers' open unit pins readers to ({} when none is open, or it is ours)."""
        return {} if self._unit is not None else pinned_versions(self.root) or {}

    def _key(self, uri: Location) -> str:
        return str(uri.relative_to(self.root))

    @staticmethod
    def _has_log(uri: Location) -> bool:
        """A committed log: a writer killed between creating `_delta_log` and its first commit leaves the folder
        without one, which is no table (deltalake refuses to open it; the next write creates it)."""
        return log_version(uri) is not None

    def _visible(self, uri: Location, pins: dict[str, int | None]) -> bool:
        """A table exists for readers: it has a log, and another writer's open unit did not create it."""
        return self._has_log(uri) and pins.get(self._key(uri), 0) is not None

    # -- locations ---------------------------------------------------------------------------------
    def curated_uri(self, table: str) -> Location:
        return self.root / "curated" / check_safe_name(table, "table")

    def table_uri(self, name: str) -> Location:
        return self.root / check_safe_name(name, "table")

    def delta_table(self, uri: Location) -> DeltaTable:
        """The newest log version of the table at `uri` as deltalake opens it (no journal pins: see `_open`)."""
        return DeltaTable(str(uri), storage_options=self.storage_options)

    def _open(self, uri: Location, as_of: AsOf = None) -> DeltaTable | None:
        """The table at `as_of`, else its latest committed version (None: no table). The pins are read
        after opening, so a unit that opens in between is still honoured."""
        if not self._has_log(uri):
            return None
        try:
            table = self.delta_table(uri)
        except TableNotFoundError:
            return None
        if as_of is None:
            pins = self._pins()
            if self._key(uri) in pins:
                as_of = pins[self._key(uri)]
                if as_of is None:
                    return None
        if as_of is not None:
            try:
                table.load_as_version(int(as_of) if str(as_of).isdigit() else as_of)
            except Exception as exc:  # deltalake raises several kinds for an out-of-range version/time
                raise WarehouseError(f"{uri.name}: no version at {as_of!r} ({exc})") from None
        return table

    # -- reads -------------------------------------------------------------------------------------
    @staticmethod
    def _scan(table: DeltaTable) -> pl.LazyFrame:
        """A lazy scan of exactly the opened version (Polars' native Parquet reader; partition filters
        prune files; the log already read by `_open` is not read again). deltalake's pyarrow-dataset
        path can abort the interpreter at exit."""
        return pl.scan_delta(table)

    def curated_tables(self) -> list[str]:
        base = self.root / "curated"
        if isinstance(base, ObjectLocation):
            names = objects.children(base)
        elif base.is_dir():
            names = [p.name for p in base.iterdir()]
        else:
            return []
        pins = self._pins()
        return sorted(name for name in names if self._visible(base / name, pins))

    def _read(self, uri: Location, as_of: AsOf, filters: dict[str, str | None],
              columns: Sequence[str] | None = None) -> pl.DataFrame | None:
        table = self._open(uri, as_of)
        if table is None:
            return None
        scan = self._scan(table)
        for column, value in filters.items():
            if value is not None:
                scan = scan.filter(pl.col(column) == value)
        if columns is not None:  # the source-order columns come along so first-wins order survives
            held = scan.collect_schema().names()
            order = [c for c in ("batch_id", "source_file", "source_row") if c not in columns and c in held]
            scan = scan.select(list(dict.fromkeys([*columns, *order])))
        frame = scan.collect()
        return frame.sort(["batch_id", "source_file", "source_row"]) if "source_row" in frame.columns else frame

    def read_curated(self, table: str, *, system: str | None = None, backend: str | None = None,
                     version: str | None = None, as_of: AsOf = None, columns: Sequence[str] | None = None) -> pl.DataFrame:
        """Curated rows of a perf table (optionally one slice, optionally some columns), in source order."""
        frame = self._read(self.curated_uri(table), as_of, {"system": system, "backend": backend, "version": version},
                           columns)
        if frame is None:
            raise WarehouseError(f"no curated table {table!r} in warehouse {self.root}")
        return frame

    def read_table(self, name: str, *, as_of: AsOf = None, columns: Sequence[str] | None = None,
                   where: dict[str, str | None] | None = None) -> pl.DataFrame:
        """An auxiliary table (batches, quarantine, duplicates, ledger tables, ...); `columns`: only those;
        `where`: only the rows whose columns equal its values (partition columns prune files)."""
        frame = self._read(self.table_uri(name), as_of, where or {}, columns)
        if frame is None:
            raise WarehouseError(f"no table {name!r} in warehouse {self.root}")
        return frame

    def read_curated_columns(self, table: str, columns: Sequence[str]) -> pl.DataFrame:
        """Only some columns of a curated table (cheap: Parquet reads just those columns)."""
        delta = self._open(self.curated_uri(table))
        if delta is None:
            raise WarehouseError(f"no curated table {table!r} in warehouse {self.root}")
        return self._scan(delta).select(list(columns)).collect()

    def auxiliary_tables(self) -> list[str]:
        """Every table beside the curated ones (batches, findings, ledger tables, ...)."""
        if not self.root.is_dir():
            return []
        pins = self._pins()
        return sorted(p.name for p in self.root.iterdir() if p.name != "curated" and self._visible(p, pins))

    def open_table(self, name: str, *, curated: bool = False) -> DeltaTable | None:
        """The Delta table itself at its latest committed version, for maintenance (None: no table)."""
        return self._open(self.curated_uri(name) if curated else self.table_uri(name))

    def has_table(self, name: str) -> bool:
        return self._visible(self.table_uri(name), self._pins())

    def table_version(self, name: str, *, curated: bool = False) -> int | None:
        table = self._open(self.curated_uri(name) if curated else self.table_uri(name))
        return None if table is None else table.version()

    def latest_commit(self, name: str) -> int | None:
        """The newest commit number of an auxiliary table from its log's file names alone: a cheap
        "has anything changed?" stamp for caches (no table is opened)."""
        uri = self.table_uri(name)
        pins = self._pins()
        return pins[self._key(uri)] if self._key(uri) in pins else log_version(uri)

    def table_history(self, name: str, *, curated: bool = False) -> list[dict]:
        table = self._open(self.curated_uri(name) if curated else self.table_uri(name))
        if table is None:
            return []
        return [
            {"version": h.get("version"), "timestamp": h.get("timestamp"), "operation": h.get("operation"),
             "parameters": h.get("operationParameters", {}), "metrics": h.get("operationMetrics", {}),
             "labels": {k.removeprefix(COMMIT_LABEL): v for k, v in h.items() if k.startswith(COMMIT_LABEL)}}
            for h in table.history()
        ]

    # -- writes ------------------------------------------------------------------------------------
    def _write(self, uri: Location, df: pl.DataFrame, *, mode: str, partition_by: Sequence[str] | None,
               predicate: str | None = None) -> int:
        """One Delta commit. Schemas merge (a column new to the table is added, null in older rows; a
        column the table has and `df` lacks is null in the new rows), so slices may differ in columns.
        On object storage the commit is deltalake's conditional put of the next log entry: a concurrent
        commit to the same table is either reconciled by deltalake (appends) or refused (a conflict)."""
        self.before_writing(uri)
        if isinstance(uri, Path):
            uri.mkdir(parents=True, exist_ok=True)
        untyped = [name for name, dtype in df.schema.items() if dtype == pl.Null]
        if untyped:  # a column with no values yet: store it as text rather than an untyped column
            df = df.with_columns(pl.col(untyped).cast(pl.String))
        try:
            write_deltalake(
                str(uri), df, mode=mode,
                partition_by=list(partition_by) if partition_by else None, predicate=predicate,
                writer_properties=WriterProperties(compression="ZSTD", compression_level=1),
                schema_mode="merge", storage_options=self.storage_options,
                commit_properties=self._commit_properties(),
            )
        except (OSError, DeltaError) as exc:  # disk full and permission errors arrive as either
            raise _write_error(uri, exc) from exc
        return self.delta_table(uri).version()

    def write_table(self, name: str, df: pl.DataFrame, *, mode: str = "append",
                    partition_by: Sequence[str] | None = None) -> int:
        """Append to or overwrite an auxiliary table in one commit; returns the new table version."""
        if mode not in ("append", "overwrite"):
            raise ValueError(f"mode must be append or overwrite, not {mode!r}")
        return self._write(self.table_uri(name), df, mode=mode, partition_by=partition_by)

    def _existing_slices(self, table: DeltaTable, slice_columns: Sequence[str],
                         partition_by: Sequence[str] | None) -> set[tuple]:
        """Slices already in the table: from the log's partition values when the slice is the partition."""
        if partition_by and list(partition_by) == list(slice_columns):
            return {tuple(p.get(c) for c in slice_columns) for p in table.partitions()}
        return set(self._scan(table).select(list(slice_columns)).unique().collect().iter_rows())

    def replace_slices(self, uri: Location, df: pl.DataFrame, slice_columns: Sequence[str],
                       slices: Iterable[Sequence[object]], *, partition_by: Sequence[str] | None = None) -> int | None:
        """Make `df` the whole content of `slices` in one commit (a slice may end up empty).

        A slice is one value tuple of `slice_columns`; every row of `df` must fall in one of them.
        New slices are appended; slices that already hold rows are overwritten by predicate, so
        re-running an interrupted write converges.
        """
        slices = {tuple(s) for s in slices}
        if not slices:
            return None
        table = self._open(uri)
        if table is None:  # created even when empty, so readers find every table of the warehouse
            return self._write(uri, df, mode="append", partition_by=partition_by)
        overlap = slices & self._existing_slices(table, slice_columns, partition_by)
        if not overlap:
            return self._write(uri, df, mode="append", partition_by=partition_by) if not df.is_empty() else None
        predicate = slice_predicate(slices, slice_columns)
        if df.is_empty():
            self.before_writing(uri)
            try:
                table.delete(predicate, commit_properties=self._commit_properties())
            except (OSError, DeltaError) as exc:
                raise _write_error(uri, exc) from exc
            return table.version()
        return self._write(uri, df, mode="overwrite", partition_by=partition_by, predicate=predicate)
