"""Decisions: validated against the lane spec, rendered in date order."""

import polars as pl
import pytest

from perfledger.ledger.decisions import DecisionError, make_decision, ordered
from perfledger.ledger.specs import find_spec

K3 = find_spec("kimi-k3")


def test_make_and_order():
    rows = pl.concat([
        make_decision(K3, "2026-08-04", "prune h12 decode rows", "kda", "2026-12-01T10:00:00"),
        make_decision(K3, "2026-08-01", "merge preview rows into 0.24.0", "moe.k3", "2026-12-01T11:00:00"),
        make_decision(K3, "2026-08-04", "second note same day", None, "2026-12-01T09:00:00"),
    ])
    got = ordered(rows, K3.model)
    assert [(d["date"], d["text"]) for d in got] == [
        ("2026-08-01", "merge preview rows into 0.24.0"), ("2026-08-04", "second note same day"),
        ("2026-08-04", "prune h12 decode rows")]
    assert ordered(rows, "other/model") == []


@pytest.mark.parametrize(("date", "text", "lane", "message"), [
    ("04/08/2026", "t", None, r"--date '04/08/2026': expected an ISO date"),
    ("2026-08-04", "  ", None, "--text: the decision text is empty"),
    ("2026-08-04", "t", "moe.k2", r"--lane: .*kimi-k3.yaml: no lane 'moe.k2'"),
])
def test_bad_decisions(date, text, lane, message):
    with pytest.raises(DecisionError, match=message):
        make_decision(K3, date, text, lane, "now")
