"""A support-matrix row's status from the deployment search's feasibility answers (the reference's semantics).

Why: 0.12.0's support matrix calls a row PASS when `cli default` finds a deployment on the row's GPU budget
from collected data (SILICON), HYBRID_PASS when only HYBRID (transfers) finds one, FAIL with the search's error
otherwise. The search runs in estimator/plan/feasible.py; this module only grades its answers, so the decision
is a pure function: SILICON found -> PASS, unless the witness read a non-silicon tier (inside SILICON a roofline-only
KDA kernel, tier `sol`, or one read off another head count, `xshape`: at best HYBRID_PASS, as rules.yaml says);
else HYBRID found -> HYBRID_PASS with the witness's weakest tier as Source; else FAIL naming why (the search
refused the model, nothing fits, the missing data, or the SLA), in SILICON's words, since the reference reports
its SILICON error.
"""

from __future__ import annotations

from perfledger.estimator.plan.feasible import Feasibility

# the FAIL prefix per feasibility kind (reasons.yaml buckets read it)
KIND_LABELS = {"refused": "search refused", "unfit": "does not fit", "missing_data": "missing data",
               "too_tight": "SLA too tight"}


def weakest(tiers, order: tuple[str, ...]) -> str:
    """The least confident tier (rules' source_tiers order; unknown tiers weakest)."""
    rank = {t: i for i, t in enumerate(order)}
    return max(tiers, key=lambda t: (rank.get(t, len(order)), t))


def needs_hybrid(silicon: Feasibility) -> bool:
    """Whether HYBRID could change the answer: not when SILICON found one, refused the model or nothing fits."""
    return not silicon.found and silicon.kind not in ("refused", "unfit")


def fail_message(outcome: Feasibility) -> str:
    label = KIND_LABELS.get(outcome.kind or "", outcome.kind or "no deployment")
    reason = outcome.reason or "no deployment found"
    text = reason if reason.lower().startswith(label.lower()) else f"{label}: {reason}"
    return f"{outcome.mode} search: {text}"


def decide(silicon: Feasibility, hybrid: Feasibility | None, order: tuple[str, ...]) -> tuple[str, str, str]:
    """(Status, ErrMsg, Source) of one row from its SILICON answer and, when asked, its HYBRID one."""
    if silicon.found:
        tier = weakest({"silicon", *silicon.tiers}, order)
        return ("PASS", "", "silicon") if tier == "silicon" else ("HYBRID_PASS", "", tier)
    if hybrid is not None and hybrid.found:
        return "HYBRID_PASS", "", weakest(hybrid.tiers or {"silicon"}, order)
    return "FAIL", fail_message(silicon), ""
