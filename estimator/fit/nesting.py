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
    rank_cols = [f"_rank{depth}" for depth in range(1, len(keys))]
    # a prefix holding a null ranks null (first), as the left join on it that this window replaces did
    out = df.with_row_index("_row").with_columns(
        pl.when(pl.any_horizontal(pl.col(keys[:depth]).is_null())).then(None)
        .otherwise(pl.col("_row").min().over(keys[:depth])).alias(col) for depth, col in enumerate(rank_cols, 1))
    out = out.sort([*rank_cols, "_row"]).unique(subset=keys, keep="first", maintain_order=True)
    return out.drop([*rank_cols, "_row"])
