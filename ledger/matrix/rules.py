"""The support-matrix format and comparison rules, loaded once from rules.yaml."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

RULES_FILE = Path(__file__).with_name("rules.yaml")


@dataclass(frozen=True)
class Transition:
    """A status change old -> new that falls into a named category."""

    old: frozenset[str]
    new: frozenset[str] | None  # None = any status other than the old one
    category: str

    def matches(self, old: str, new: str) -> bool:
        return old in self.old and old != new and (self.new is None or new in self.new)


@dataclass(frozen=True)
class MatrixRules:
    """What a valid matrix row looks like and how status changes are classified."""

    key: tuple[str, ...]
    columns: tuple[str, ...]
    legacy_widths: tuple[int, ...]
    statuses: tuple[str, ...]
    modes: tuple[str, ...]
    source_tiers: tuple[str, ...]
    legacy_pass_source: str
    pass_statuses: tuple[str, ...]
    blocking: tuple[Transition, ...]
    listed: tuple[Transition, ...]
    backends: tuple[str, ...]
    hardware: dict[str, dict]  # dtype -> {software_fallback: [systems]}, in reason order
    quant_dtypes: dict[str, str]  # quant label -> dtype it needs natively
    unsupported_quants: dict[str, dict[str, tuple[str, ...]]]  # system -> role -> quant labels it cannot run
    memory_fit: dict[str, int]  # the replica a priced row must fit in (tp, moe_tp, moe_ep, batch, isl, prefix, osl)
    search: dict[str, float]  # the planning question per row (total_gpus, isl, osl, prefix, ttft, tpot)

    @property
    def replica_gpus(self) -> int:
        """GPUs of the `memory_fit` replica: the attention TP group, which the MoE TP x EP group spans."""
        fit = self.memory_fit
        return max(fit.get("tp", 1), fit.get("moe_tp", 1) * fit.get("moe_ep", 1))

    def headers(self) -> dict[tuple[str, ...], int]:
        """Accepted header tuples -> their width (current first, then the legacy ones)."""
        widths = (len(self.columns), *self.legacy_widths)
        return {self.columns[:w]: w for w in widths}


def _as_set(value: str | list[str]) -> frozenset[str] | None:
    if value == "*":
        return None
    return frozenset([value] if isinstance(value, str) else value)


def _transitions(entries: list[dict]) -> tuple[Transition, ...]:
    return tuple(Transition(_as_set(e["old"]) or frozenset(), _as_set(e["new"]), e["category"]) for e in entries)


@cache
def load_rules(path: Path = RULES_FILE) -> MatrixRules:
    raw = yaml.safe_load(path.read_text())
    return MatrixRules(
        key=tuple(raw["key"]),
        columns=tuple(raw["columns"]),
        legacy_widths=tuple(raw["legacy_widths"]),
        statuses=tuple(raw["statuses"]),
        modes=tuple(raw["modes"]),
        source_tiers=tuple(raw["source_tiers"]),
        legacy_pass_source=raw["legacy_pass_source"],
        pass_statuses=tuple(raw["pass_statuses"]),
        blocking=_transitions(raw["blocking"]),
        listed=_transitions(raw["listed"]),
        backends=tuple(raw["backends"]),
        hardware={d: {"software_fallback": tuple((r or {}).get("software_fallback", []))} for d, r in raw["hardware"].items()},
        quant_dtypes=dict(raw["quant_dtypes"]),
        unsupported_quants={sys_: {role: tuple(q) for role, q in roles.items()}
                            for sys_, roles in (raw.get("unsupported_quants") or {}).items()},
        memory_fit={k: int(v) for k, v in (raw.get("memory_fit") or {}).items()},
        search=dict(raw.get("search") or {}),
    )
