"""Dated owner decisions and notes for a model's ledger, validated against its lane spec."""

from __future__ import annotations

from datetime import date as Date

import polars as pl

from perfledger.ledger.specs import LaneSpecError, ModelSpec

DECISIONS_SCHEMA = {"model": pl.String, "date": pl.String, "lane": pl.String, "text": pl.String,
                    "recorded_at": pl.String}


class DecisionError(ValueError):
    """A decision that cannot be recorded (bad date, unknown lane, empty text)."""


def make_decision(spec: ModelSpec, date: str, text: str, lane: str | None, recorded_at: str) -> pl.DataFrame:
    """One decision row; `date` must be YYYY-MM-DD and `lane` (when given) a lane of the spec."""
    try:
        day = Date.fromisoformat(date)
    except ValueError:
        raise DecisionError(f"--date {date!r}: expected an ISO date YYYY-MM-DD") from None
    if not text.strip():
        raise DecisionError("--text: the decision text is empty")
    if lane is not None:
        try:
            spec.lane(lane)
        except LaneSpecError as exc:
            raise DecisionError(f"--lane: {exc}") from None
    row = {"model": spec.model, "date": day.isoformat(), "lane": lane, "text": text.strip(), "recorded_at": recorded_at}
    return pl.DataFrame([row], schema=DECISIONS_SCHEMA)


def ordered(decisions: pl.DataFrame, model: str) -> list[dict]:
    """A model's decisions in date order (ties in recording order)."""
    if not decisions.height:
        return []
    return decisions.filter(pl.col("model") == model).sort(["date", "recorded_at"]).to_dicts()
