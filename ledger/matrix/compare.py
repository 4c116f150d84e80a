"""Compare two support-matrix snapshots on the six-column key: added, removed, changed, blocking.

Only like is compared with like: each row's GPU budget is the `--total-gpus N` of its Command, or, for a
matrix we built, the one replica rules.yaml `memory_fit` sizes. A status change between rows checked under
different budgets (the reference's 128-GPU sweep vs our one 8-GPU replica) is listed as `budget_differs`,
never called blocking: fitting in 128 GPUs and not in 8 is no regression.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from perfledger.console import EXIT_BLOCKING
from perfledger.ledger.matrix.rules import MatrixRules, Transition, load_rules
from perfledger.ledger.matrix.store import BUILT_SOURCE

TOTAL_GPUS = r"--total-gpus[ =](\d+)"

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
    budget_differs: list[dict] = field(default_factory=list)  # Status changed between different GPU budgets
    budgets: dict[str, list[int | None]] = field(default_factory=dict)  # old/new: the GPU budgets their rows name

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
            "budgets": self.budgets,
            "budget_differs": len(self.budget_differs),
            "exit_code": self.exit_code,
            "rows": {
                "added": self.added,
                "removed": self.removed,
                "changed": self.changed,
                "metadata": self.metadata,
                "blocking": self.blocking,
                "budget_differs": self.budget_differs,
            },
        }


def _category(rules: tuple[Transition, ...], old: str, new: str) -> str | None:
    return next((t.category for t in rules if t.matches(old, new)), None)


def with_gpu_budget(frame: pl.DataFrame, rules: MatrixRules) -> pl.DataFrame:
    """`frame` plus `gpus`: the GPU budget each row was checked under (`--total-gpus N` in its Command, else
    one `memory_fit` replica for a matrix we built, else null: unknown)."""
    command = pl.col("Command").cast(pl.String) if "Command" in frame.columns else pl.lit(None, pl.String)
    from_command = command.str.extract(TOTAL_GPUS, 1).cast(pl.Int64)
    built = (pl.col("snapshot_source") == BUILT_SOURCE) if "snapshot_source" in frame.columns else pl.lit(False)
    return frame.with_columns(gpus=pl.when(from_command.is_not_null()).then(from_command)
                              .when(built).then(pl.lit(rules.replica_gpus, pl.Int64)).otherwise(pl.lit(None, pl.Int64)))


def compare_matrices(old: pl.DataFrame, new: pl.DataFrame, rules: MatrixRules | None = None) -> MatrixDiff:
    """Diff keyed on the rules' key; Status transitions are classified as blocking or listed, except those
    between rows of different GPU budgets (`budget_differs`)."""
    rules = rules or load_rules()
    key = list(rules.key)
    values = ["Status", "Command", "Source", "gpus"]
    a = with_gpu_budget(old, rules).select(key + values)
    b = with_gpu_budget(new, rules).select(key + values)
    diff = MatrixDiff(
        added=b.join(a, on=key, how="anti").select(key + ["Status"]).sort(key).to_dicts(),
        removed=a.join(b, on=key, how="anti").select(key + ["Status"]).sort(key).to_dicts(),
        budgets={"old": sorted(a["gpus"].unique().to_list(), key=lambda g: (g is None, g)),
                 "new": sorted(b["gpus"].unique().to_list(), key=lambda g: (g is None, g))},
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
        budgets = (row["gpus"], row["gpus_new"])
        if None not in budgets and budgets[0] != budgets[1]:
            diff.budget_differs.append({**record, "gpus": list(budgets)})
            diff.categories["budget_differs"] = diff.categories.get("budget_differs", 0) + 1
            continue
        category = _category(rules.blocking, old_s, new_s)
        if category:
            diff.blocking.append({**record, "category": category})
        category = category or _category(rules.listed, old_s, new_s) or "other"
        diff.categories[category] = diff.categories.get(category, 0) + 1
    return diff
