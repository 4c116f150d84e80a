"""Counts over one support-matrix snapshot: rows by status, rows per model, a model's coverage."""

from __future__ import annotations

import polars as pl

from perfledger.ledger.matrix.rules import load_rules


def by_status(frame: pl.DataFrame) -> dict[str, int]:
    """Rows per Status, every known status present (0 when absent), in rule order."""
    counts = dict(frame.group_by("Status").len().iter_rows())
    return {status: int(counts.get(status, 0)) for status in load_rules().statuses}


def summarize(frame: pl.DataFrame, label: str) -> dict:
    """The `matrix import` JSON: label, rows, by_status, rows per HuggingFaceID."""
    models = frame.group_by("HuggingFaceID").len().sort("HuggingFaceID")
    return {
        "label": label,
        "rows": frame.height,
        "by_status": by_status(frame),
        "models": {m: int(n) for m, n in models.iter_rows()},
    }


def count_model(frame: pl.DataFrame, model: str) -> dict:
    """The `matrix count` JSON for one HF model id."""
    rows = frame.filter(pl.col("HuggingFaceID") == model)
    return {"rows": rows.height, "by_status": by_status(rows)}


def model_block(frame: pl.DataFrame, model: str) -> dict:
    """A model's matrix block for the ledger report: status counts, Source tiers and missing union keys.

    Coverage is measured against the union of (System, Backend, Version, Mode) keys anywhere in the
    snapshot, which is what the old "union coverage" test required of a fully regenerated model.
    """
    union_cols = ["System", "Backend", "Version", "Mode"]
    own = frame.filter(pl.col("HuggingFaceID") == model)
    union = frame.select(union_cols).unique()
    missing = union.join(own.select(union_cols), on=union_cols, how="anti").sort(union_cols)
    tiers = own.filter(pl.col("Source").fill_null("") != "").group_by("Source").len().sort("Source")
    return {
        **count_model(frame, model),
        "union_keys": union.height,
        "missing_keys": [dict(zip(union_cols, r, strict=True)) for r in missing.iter_rows()],
        "sources": {s: int(n) for s, n in tiers.iter_rows()},
    }
