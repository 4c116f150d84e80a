"""nested_order: the row order of a walk over dict[k1][k2]... filled in file order (the reference's loader)."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from perfledger.estimator.fit.nesting import nested_order


def _dict_walk(rows: list[tuple], depth: int) -> list[tuple]:
    """The reference's order, spelled out: insert each row into nested dicts (a repeated full key keeps its first
    row), then walk them depth-first in insertion order."""
    tree: dict = {}
    for row in rows:
        node = tree
        for key in row[:depth - 1]:
            node = node.setdefault(key, {})
        node.setdefault(row[depth - 1], row)

    def walk(node, level):
        for value in node.values():
            yield from (walk(value, level + 1) if level < depth - 1 else [value])

    return list(walk(tree, 0))


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 4).flatmap(lambda depth: st.tuples(
    st.just(depth), st.lists(st.tuples(*[st.integers(0, 3)] * depth, st.integers(0, 10**6)), max_size=60))))
def test_rows_follow_the_nested_dict_walk(case):
    depth, rows = case
    keys = [f"k{i}" for i in range(depth)]
    df = pl.DataFrame(rows, schema=[*keys, "latency"], orient="row") if rows else pl.DataFrame(
        schema={**{k: pl.Int64 for k in keys}, "latency": pl.Int64})
    assert nested_order(df, keys).rows() == _dict_walk(rows, depth)
