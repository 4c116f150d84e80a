"""Explain where our built matrix and an imported one disagree, per key and counted by reason.

Both sides' non-pass reasons are bucketed by the patterns in reasons.yaml, so the report (and `matrix
explain`) can say "8 keys: imported PASS, ours FAIL because lane mla_bmm.96fam has no collected rows".
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import polars as pl
import yaml

from perfledger.ledger.matrix.compare import compare_matrices
from perfledger.ledger.matrix.rules import load_rules

REASONS_FILE = Path(__file__).with_name("reasons.yaml")


@cache
def load_reasons(path: Path = REASONS_FILE) -> dict:
    raw = yaml.safe_load(Path(path).read_text())
    raw["compiled"] = [(re.compile(r["regex"], re.IGNORECASE), r["reason"]) for r in raw["reasons"]]
    return raw


def error_signature(err_msg: str | None, limit: int = 200) -> str:
    """The last `...Error:`/`...Exception:` line of a stored traceback (newlines are literal `\\n`)."""
    lines = [line.strip() for line in (err_msg or "").replace("\\n", "\n").splitlines() if line.strip()]
    hits = [line for line in lines if "Error" in line.split(":")[0] or "Exception" in line.split(":")[0]]
    return (hits[-1] if hits else lines[-1] if lines else "")[:limit]


def reason_of(status: str, err_msg: str | None, source: str | None) -> str:
    """A short bucket for a row's outcome: the pass tier, or the first reasons.yaml pattern that matches."""
    if status in load_rules().pass_statuses:
        return f"{status} ({source or 'silicon'})"
    text = (err_msg or "").replace("\\n", "\n")
    for pattern, template in load_reasons()["compiled"]:
        hit = pattern.search(text)
        if hit:
            return template.format(None, *hit.groups())
    return f"{status}: {error_signature(err_msg, 80) or 'no message'}"


def _why(ours: str, imported: str, ours_reason: str, imported_reason: str) -> str:
    """The side that is not a pass explains the disagreement; both when neither passes."""
    passes = load_rules().pass_statuses
    if imported in passes and ours not in passes:
        return f"ours: {ours_reason}"
    if ours in passes and imported not in passes:
        return f"imported: {imported_reason}"
    return f"ours: {ours_reason}; imported: {imported_reason}"


def model_disagreements(ours: pl.DataFrame, imported: pl.DataFrame, model: str) -> dict:
    """Per-key disagreements (with both sides' reasons) and their counts by transition and reason."""
    rules = load_rules()
    key = list(rules.key)
    mine = ours.filter(pl.col("HuggingFaceID") == model)
    theirs = imported.filter(pl.col("HuggingFaceID") == model)
    diff = compare_matrices(theirs, mine)
    rows_by_key = {side: {tuple(r[c] for c in key): r for r in frame.iter_rows(named=True)}
                   for side, frame in (("ours", mine), ("imported", theirs))}
    rows, counts = [], {}
    for r in diff.changed:
        k = tuple(r[c] for c in key)
        o, i = rows_by_key["ours"][k], rows_by_key["imported"][k]
        why = _why(r["new"], r["old"], reason_of(o["Status"], o["ErrMsg"], o["Source"]),
                   reason_of(i["Status"], i["ErrMsg"], i["Source"]))
        rows.append({**{c: r[c] for c in key[2:]}, "imported": r["old"], "ours": r["new"],
                     "reason": o["ErrMsg"] or o["Source"] or "", "imported_reason": error_signature(i["ErrMsg"]),
                     "why": why})
        counts[(f"{r['old']} → {r['new']}", why)] = counts.get((f"{r['old']} → {r['new']}", why), 0) + 1
    reasons = load_reasons()
    for side, n in (("only_imported", len(diff.removed)), ("only_ours", len(diff.added))):
        if n:
            counts[(side.replace("_", " "), reasons[side])] = n
    by_reason = [{"transition": t, "reason": w, "keys": n}
                 for (t, w), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    shared = theirs.join(mine.select(key), on=key, how="semi").height
    return {"agree": shared - len(rows), "disagree": rows, "only_ours": len(diff.added),
            "only_imported": len(diff.removed), "by_reason": by_reason}
