"""Resolving a need with alternatives (needs.yaml `any_of`): the layer op priced by whichever op set the cell's data holds.

Backends measure one layer op differently (vLLM collects MLA as a whole module, sglang/trtllm as separate
kernels; KDA scan/decode kernels have per-backend names), so one need lists op sets tried in order. An
option whose every op is SILICON wins at once; otherwise the first option whose every op is priced at all
(SILICON or HYBRID) wins -- a later option's real rows beat an earlier option's transfer only in that first
pass, as the reference prefers a fallback with data over an empirical guess for the primary. When none is
priced, the reason names every option's first unpriced op, so the row's ErrMsg says what each path lacks.
"""

from __future__ import annotations

from collections.abc import Callable

from perfledger.ledger.matrix.needs import Choice, Need, Option

PriceOne = Callable[[Need], tuple[str | None, str | None]]  # need -> (tier, None) or (None, "label: reason")


def resolve_choice(choice: Choice, backend: str, price_one: PriceOne,
                   weakest: Callable[[list[str]], str]) -> tuple[str | None, str | None, Option | None]:
    """(tier, None, winning option) or (None, reason naming every option, None).

    Args:
        choice: the need with its options.
        backend: the cell's backend (options with `backends` that omit it are skipped, and say so).
        price_one: prices one op need of the cell (SILICON, then HYBRID; memoised by the caller).
        weakest: the least confident tier of a list.
    """
    reasons, fallback = [], None
    for i, option in enumerate(choice.options, 1):
        if option.backends and backend not in option.backends:
            reasons.append(f"[{i}] {option.label}: not used by {backend} (only {', '.join(option.backends)})")
            continue
        tiers, error = [], None
        for need in option.needs:
            tier, error = price_one(need)
            if tier is None:
                break
            tiers.append(tier)
        if error is not None:
            reasons.append(f"[{i}] {error}")
            continue
        tier = weakest(tiers) if tiers else "silicon"
        if tier == "silicon":
            return tier, None, option
        fallback = fallback or (tier, option)
    if fallback:
        return fallback[0], None, fallback[1]
    return None, f"{choice.name} ({choice.phase}): no alternative priced: {'; '.join(reasons)}", None
