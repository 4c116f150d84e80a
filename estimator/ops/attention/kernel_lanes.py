"""Attention kernel lanes: one lane's rows answer a slice, as the reference's lane walk does.

Attention tables may hold several `kernel_source` lanes measuring the same shapes (vllm: fa2,
flashinfer prefill/decode, triton). Without a pinned lane the reference walks the own version's lanes by
measured coverage (most slices, then most rows, then name), then lanes only donor versions carry, ranked
alike (b200 vLLM 0.22.0: its own flashinfer lane before 0.24.0's denser trtllm-prefill lane, probed), and
serves a slice from the first lane that carries it; rows of other lanes never mix in (a missing isl=1 row
stays missing).

A static engine (query column `lane_defaults`) instead heads the walk with the framework's default kernel
from the wheel's systems/attention_lane_defaults.yaml, matched on backend, the highest listed version at or
below the query's (PEP 440, perfledger.versions), and the system's exact sm_version. With an entry, the rest of the walk
is the reference's tiering: lanes of the own version, then lanes only donors carry; within each, the known
lanes by density, then `default`, then other labels by density. No file or no entry: the plain walk.
"""

from __future__ import annotations

import polars as pl

from perfledger import settings
from perfledger.estimator.data.sources import first_wins
from perfledger.estimator.errors import NoDataError
from perfledger.safe_io import data_yaml
from perfledger.versions import version_key

LANE = "kernel_source"
KNOWN_LANES = ("fa3", "fla", "flashinfer", "triton", "trtllm_mha")  # the framework lane vocabulary
DEFAULTS_FILE = "attention_lane_defaults.yaml"


def framework_default(defaults: dict, backend: str, version: str, sm: int | None) -> tuple[bool, str | None]:
    """(matched, lane) for (backend, floor-matched version, exact sm); lane None when the entry is `default`."""
    versions = [v for v in (defaults.get(backend) or {}) if version_key(v) <= version_key(version)]
    if not versions or sm is None:
        return False, None
    lane = (defaults[backend][max(versions, key=version_key)] or {}).get(int(sm))
    if lane is None:
        return False, None
    return True, None if lane == "default" else str(lane)


def pinned_walk(head: str | None, own: dict, shared: dict) -> list[str]:
    """Pinned head, own-version lanes, then donor-only lanes; each tier: known by density, default, others.

    `own` / `shared` map lane -> (slices, rows) for the own version and the shared (donor) table.
    """
    def tier(density: dict, skip) -> list[str]:
        def rank(lane):
            return -density[lane][0], -density[lane][1], lane

        lanes = [lane for lane in density if lane != head and lane not in skip]
        known = sorted((lane for lane in lanes if lane in KNOWN_LANES), key=rank)
        other = sorted((lane for lane in lanes if lane not in KNOWN_LANES and lane != "default"), key=rank)
        return known + (["default"] if "default" in lanes else []) + other

    return ([head] if head else []) + tier(own, ()) + tier(shared, own)


def _lane_defaults(est, system: str) -> tuple[dict, int | None]:
    """(defaults file as a dict or {} when the wheel lacks it, the system's sm_version or None)."""
    def build():
        package = settings.aic_package_dir()
        path = None if package is None else package / "systems" / DEFAULTS_FILE
        doc = data_yaml(path) if path is not None and path.is_file() else {}
        if not isinstance(doc, dict):
            raise ValueError(f"{path}: expected a mapping backend -> version -> sm -> lane")
        return doc

    return est.memo(("lane_defaults_file",), build), est.spec(system).sm_version


def _density(est, system, backend, version, table, slice_columns, shared: bool) -> dict:
    """lane -> (distinct slices, rows) in the shared (donor-including) or own-version table."""
    try:
        df = est.table(system, backend, version, table, shared=shared, dedupe=False)
    except NoDataError:
        return {}
    if LANE not in df.columns:
        return {}
    density = df.filter(pl.col(LANE).is_not_null()).group_by(LANE).agg(
        pl.struct(*slice_columns).n_unique().alias("slices"), pl.len().alias("rows"))
    return {lane: (slices, rows) for lane, slices, rows in density.iter_rows()}


def lane_order(est, system: str, backend: str, version: str, table: str, slice_columns: tuple[str, ...],
               pinned: bool = False) -> list[str]:
    """Own-version lanes, then donor-only lanes, each by (-distinct slices, -rows, name); `pinned`: the
    framework-default walk above."""

    def build():
        shared = _density(est, system, backend, version, table, slice_columns, True)
        if pinned:
            defaults, sm = _lane_defaults(est, system)
            matched, head = framework_default(defaults, backend, version, sm)
            if matched:
                return pinned_walk(head, _density(est, system, backend, version, table, slice_columns, False), shared)
        own = _density(est, system, backend, version, table, slice_columns, False)

        def rank(density):
            return sorted(density, key=lambda lane: (-density[lane][0], -density[lane][1], lane))

        return rank(own) + [lane for lane in rank(shared) if lane not in own]

    return est.memo(("lane_order", system, backend, version, table, slice_columns, pinned), build)


def lane_slice(est, system: str, backend: str, version: str, table: str, filters: dict, where=None,
               lane_columns: tuple[str, ...] | None = None, shared: bool = True, pinned: bool = False) -> pl.DataFrame:
    """Rows of the first lane (in lane_order) holding this slice, first-wins; a typed miss names the slice.

    `where` (a polars predicate with a readable str()) narrows the slice further; `lane_columns` (default:
    the filter columns) are the columns whose distinct values count as slices when ranking lanes;
    shared=False reads the own version only (EMPIRICAL); pinned: the static engine's framework-default walk.
    """
    df = est.table(system, backend, version, table, shared=shared, dedupe=False)
    predicates = [pl.col(col) == val for col, val in filters.items()] + ([where] if where is not None else [])
    if predicates:  # one pass over the table
        df = df.filter(*predicates)
    if not df.height:
        where = ", ".join([f"{k}={v}" for k, v in filters.items()] + ([str(where)] if where is not None else []))
        raise NoDataError(f"no {table} rows for {system}/{backend}/{version} with {where}")
    if LANE in df.columns:
        present = set(df[LANE].unique().to_list())
        lane = next(name for name in lane_order(est, system, backend, version, table, lane_columns or tuple(filters), pinned)
                    if name in present)
        df = df.filter(pl.col(LANE) == lane)
    return first_wins(df, table)


def pool_rows(est, key, table: str, filters: dict, mha: bool, lane_columns: tuple[str, ...], shared: bool = True,
              lane: str | None = None) -> pl.DataFrame:
    """One attention pool's rows for a query: the MHA pool (every heads == kv heads row) or the query's kv-heads
    slice without its heads == kv rows, as the reference files them; from the first lane holding them, or `lane`."""
    same = pl.col("num_heads") == pl.col("num_key_value_heads")
    if not mha:
        filters = {**filters, "num_key_value_heads": int(key["kv_heads"])}
    where = same if mha else ~same
    if lane is not None:
        where = where & (pl.col(LANE) == lane)
    return lane_slice(est, key["system"], key["backend"], key["version"], table, filters, where=where,
                      lane_columns=lane_columns, shared=shared, pinned=bool(key.get("lane_defaults", False)))
