"""Nested-table iteration order: the reference builds dict[key1][key2]... in file order and walks it.

Ties between equidistant neighbours resolve by that walk order, so parity needs the same order.
"""

from __future__ import annotations

import polars as pl


def nested_order(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Rows sorted as a walk of dict[keys[0]][keys[1]]... built by inserting rows in file order.

    Each level's key is ranked by the row where its prefix first appeared; duplicates (same full
    key) are dropped keeping the first row, as the loader does.
    """
    out = df.with_row_index("_row")
    rank_cols = []
    for depth in range(1, len(keys) + 1):
        prefix = keys[:depth]
        col = f"_rank{depth}"
        first = out.group_by(prefix).agg(pl.col("_row").min().alias(col))
        out = out.join(first, on=prefix, how="left")
        rank_cols.append(col)
    out = out.sort(rank_cols[:-1] + ["_row"]).unique(subset=keys, keep="first", maintain_order=True)
    return out.drop(rank_cols + ["_row"])
