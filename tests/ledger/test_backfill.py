"""Backfill windows: a batch's collection date and the batches a date window and system filter select."""

from __future__ import annotations

from datetime import UTC, date, datetime

import polars as pl
import pytest

from perfledger.ledger.backfill import BackfillError, collection_dates, parse_day, window_batches

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _frames():
    batches = pl.DataFrame({"batch_id": ["a", "b", "c"], "system": ["h200_sxm", "b200_sxm", "h200_sxm"],
                            "started_at": [T0, T0, T0]})
    tables = pl.DataFrame({"batch_id": ["a", "a", "b"], "meta_collected_at": ["2026-01-10T08:00:00Z", "2026-01-05", None]})
    return batches, tables


def test_collection_date_prefers_collection_meta_then_ingest_day() -> None:
    dates = collection_dates(*_frames())
    assert dict(zip(dates["batch_id"], dates["collected"], strict=True)) == {
        "a": date(2026, 1, 5), "b": date(2026, 3, 1), "c": date(2026, 3, 1)}


def test_window_bounds_are_inclusive_and_systems_filter() -> None:
    dates = collection_dates(*_frames())
    assert window_batches(dates, date(2026, 1, 5), date(2026, 1, 5), None) == ["a"]
    assert window_batches(dates, date(2026, 1, 6), None, None) == ["b", "c"]
    assert window_batches(dates, date(2026, 1, 1), None, ["h200_sxm"]) == ["a", "c"]
    assert window_batches(dates, date(2027, 1, 1), None, None) == []


def test_bad_dates_name_the_flag() -> None:
    with pytest.raises(BackfillError, match=r"--since '2026-13-01': expected a date"):
        parse_day("2026-13-01", "--since")
