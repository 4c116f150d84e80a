"""Event classification: what an ingest did to a cell."""

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfledger.ledger.cells import CELLS_SCHEMA
from perfledger.ledger.events import classify, derive_events


@pytest.mark.parametrize(("before", "after", "ks_b", "ks_a", "bb", "ba", "kind"), [
    (0, 976, [], ["chunk_kda"], [], ["b1"], "collect"),
    (976, 976, ["chunk_kda"], ["chunk_kda"], ["b1"], ["b1"], None),
    (1096, 1074, ["k"], ["k"], ["b1"], ["b2"], "prune"),
    (541, 0, ["k"], [], ["b1"], [], "prune"),
    (541, 541, ["sglang_marlin_moe"], ["sglang_marlin_moe_situ_as_silu"], ["b1"], ["b2"], "relabel"),
    (976, 1064, ["k"], ["k"], ["b1"], ["b1", "b2"], "append"),
    (976, 1064, ["k"], ["k", "j"], ["b1"], ["b2"], "replace"),
    (976, 976, ["k"], ["k"], ["b1"], ["b2"], "recollect"),
])
def test_classify(before, after, ks_b, ks_a, bb, ba, kind):
    assert classify(before, after, ks_b, ks_a, bb, ba) == kind


def cells(rows: list[tuple]) -> pl.DataFrame:
    data = [{"model": "m", "lane": lane, "table": "t", "system": s, "backend": "sglang", "version": "1", "rows": n,
             "kernel_sources": ks, "batch_ids": b} for lane, s, n, ks, b in rows]
    frame = pl.DataFrame(data)
    return frame.with_columns([pl.lit(None, t).alias(c) for c, t in CELLS_SCHEMA.items() if c not in frame.columns])


def test_derive_events_credits_the_batch_that_holds_the_rows():
    before = cells([("kda", "b200_sxm", 976, ["a"], ["b1"]), ("kda", "l40s", 1096, ["a"], ["b1"])])
    after = cells([("kda", "b200_sxm", 976, ["a"], ["b1"]), ("kda", "l40s", 1074, ["a"], ["b2"]),
                   ("moe", "b200_sxm", 3078, ["m"], ["b2"])])
    events = derive_events(before, after, ["b2", "b9"], "2026-08-04T00:00:00+00:00")
    assert events.select("lane", "system", "kind", "rows_before", "rows_after").rows() == [
        ("kda", "l40s", "prune", 1096, 1074), ("moe", "b200_sxm", "collect", 0, 3078)]
    assert events["batch_ids"].to_list() == [["b2"], ["b2"]]


def test_removed_cell_credits_all_batches():
    before = cells([("kda", "l40s", 1096, ["a"], ["b1"])])
    after = cells([("kda", "l40s", 0, [], [])])
    events = derive_events(before, after, ["b3"], "t")
    assert events.row(0, named=True)["kind"] == "prune" and events["batch_ids"].to_list() == [["b3"]]


def test_first_state_is_all_collects():
    after = cells([("kda", "b200_sxm", 976, ["a"], ["b1"])])
    events = derive_events(pl.DataFrame(), after, ["b1"], "t")
    assert events["kind"].to_list() == ["collect"]


names = st.lists(st.sampled_from(["a", "b", "c"]), max_size=3)


@settings(max_examples=200, deadline=None)
@given(rb=st.integers(0, 5000), ra=st.integers(0, 5000), kb=names, ka=names, bb=names, ba=names)
def test_classify_properties(rb, ra, kb, ka, bb, ba):
    kind = classify(rb, ra, kb, ka, bb, ba)
    unchanged = rb == ra and set(kb) == set(ka) and set(bb) == set(ba)
    assert (kind is None) == unchanged
    if kind == "collect":
        assert rb == 0
    if ra < rb:
        assert kind == "prune"
    if kind in ("append",):
        assert ra > rb
