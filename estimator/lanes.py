"""Attention kernel lanes: one lane's rows answer a slice, as the reference's lane walk does.

Attention tables may hold several `kernel_source` lanes measuring the same shapes (vllm: fa2,
flashinfer prefill/decode, triton). Without a pinned lane the reference walks lanes by measured
coverage in the table (most slices, then most rows, then name) and serves a slice from the first lane
that carries it; rows of other lanes never mix in (a missing isl=1 row stays missing).
"""

from __future__ import annotations

import polars as pl

from estimator.errors import NoDataError
from estimator.sources import first_wins

LANE = "kernel_source"


def lane_order(est, system: str, backend: str, version: str, table: str, slice_columns: tuple[str, ...]) -> list[str]:
    """Lanes of `table` by (-distinct slices, -rows, name)."""

    def build():
        df = est.table(system, backend, version, table, shared=True, dedupe=False)
        if LANE not in df.columns:
            return []
        density = df.group_by(LANE).agg(pl.struct(*slice_columns).n_unique().alias("slices"), pl.len().alias("rows"))
        return density.sort(["slices", "rows", LANE], descending=[True, True, False])[LANE].to_list()

    return est.memo(("lane_order", system, backend, version, table, slice_columns), build)


def lane_slice(est, system: str, backend: str, version: str, table: str, filters: dict, where=None,
               lane_columns: tuple[str, ...] | None = None, shared: bool = True) -> pl.DataFrame:
    """Rows of the first lane (in lane_order) holding this slice, first-wins; a typed miss names the slice.

    `where` (a polars predicate with a readable str()) narrows the slice further; `lane_columns` (default:
    the filter columns) are the columns whose distinct values count as slices when ranking lanes;
    shared=False reads the own version only (EMPIRICAL).
    """
    df = est.table(system, backend, version, table, shared=shared, dedupe=False)
    for col, val in filters.items():
        df = df.filter(pl.col(col) == val)
    if where is not None:
        df = df.filter(where)
    if not df.height:
        where = ", ".join([f"{k}={v}" for k, v in filters.items()] + ([str(where)] if where is not None else []))
        raise NoDataError(f"no {table} rows for {system}/{backend}/{version} with {where}")
    if LANE in df.columns:
        present = set(df[LANE].unique().to_list())
        lane = next(name for name in lane_order(est, system, backend, version, table, lane_columns or tuple(filters))
                    if name in present)
        df = df.filter(pl.col(LANE) == lane)
    return first_wins(df, table)
