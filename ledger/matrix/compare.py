"""Compare two support-matrix snapshots on the six-column key: added, removed, changed, blocking."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from perfledger.console import EXIT_BLOCKING
from perfledger.ledger.matrix.rules import MatrixRules, Transition, load_rules

EXIT_SAME, EXIT_CHANGED = 0, 1


@dataclass
class MatrixDiff:
    """Differences old -> new; row lists hold the key columns plus the changed values."""

    added: list[dict] = field(default_factory=list)
    removed: list[dict] = field(default_factory=list)
    changed: list[dict] = field(default_factory=list)  # Status changed
    metadata: list[dict] = field(default_factory=list)  # same Status, Command and/or Source changed
    transitions: dict[str, int] = field(default_factory=dict)
    categories: dict[str, int] = field(default_factory=dict)
    blocking: list[dict] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.blocking:
            return EXIT_BLOCKING
        return EXIT_CHANGED if (self.added or self.removed or self.changed or self.metadata) else EXIT_SAME

    def as_json(self, old: str, new: str) -> dict:
        return {
            "old": old,
            "new": new,
            "added": len(self.added),
            "removed": len(self.removed),
            "changed": len(self.changed),
            "metadata_changes": len(self.metadata),
            "transitions": self.transitions,
            "categories": self.categories,
            "blocking": len(self.blocking),
            "exit_code": self.exit_code,
            "rows": {
                "added": self.added,
                "removed": self.removed,
                "changed": self.changed,
                "metadata": self.metadata,
                "blocking": self.blocking,
            },
        }


def _category(rules: tuple[Transition, ...], old: str, new: str) -> str | None:
    return next((t.category for t in rules if t.matches(old, new)), None)


def compare_matrices(old: pl.DataFrame, new: pl.DataFrame, rules: MatrixRules | None = None) -> MatrixDiff:
    """Diff keyed on the rules' key; Status transitions are classified as blocking or listed."""
    rules = rules or load_rules()
    key = list(rules.key)
    values = ["Status", "Command", "Source"]
    a = old.select(key + values)
    b = new.select(key + values)
    diff = MatrixDiff(
        added=b.join(a, on=key, how="anti").select(key + ["Status"]).sort(key).to_dicts(),
        removed=a.join(b, on=key, how="anti").select(key + ["Status"]).sort(key).to_dicts(),
    )
    both = a.join(b, on=key, how="inner", suffix="_new").sort(key)
    for row in both.iter_rows(named=True):
        ident = {c: row[c] for c in key}
        old_s, new_s = row["Status"], row["Status_new"]
        meta = [c for c in ("Command", "Source") if (row[c] or "") != (row[f"{c}_new"] or "")]
        if old_s == new_s:
            if meta:
                diff.metadata.append({**ident, "fields": meta})
            continue
        record = {**ident, "old": old_s, "new": new_s, "metadata": meta}
        diff.changed.append(record)
        name = f"{old_s}->{new_s}"
        diff.transitions[name] = diff.transitions.get(name, 0) + 1
        category = _category(rules.blocking, old_s, new_s)
        if category:
            diff.blocking.append({**record, "category": category})
        category = category or _category(rules.listed, old_s, new_s) or "other"
        diff.categories[category] = diff.categories.get(category, 0) + 1
    return diff
