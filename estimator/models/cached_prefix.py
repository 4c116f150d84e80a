"""A cached prefix on a context pass: each op kind's models.yaml `cached_prefix` rule (its sequence length at the whole
or the new length, the prefix as a query field, or the causal share of a kernel that runs over both), applied to the
leaves of an op list (fallback and overlap groups too). A prefill pass refuses an op kind with a sequence and no rule;
an IFB mixed step's shared pass applies only the causal rules (its MLA block sees the chunk's cached tokens)."""

from __future__ import annotations

from dataclasses import dataclass

from perfledger.estimator.errors import UnsupportedModelError
from perfledger.estimator.models.config import MODELS_YAML, catalog

# query fields that carry a sequence length: a context op with one needs a models.yaml `cached_prefix` rule
SEQUENCE_FIELDS = ("isl", "seq")


def map_leaf_ops(ops: list, leaf) -> list:
    """`ops` with every leaf op's (query, scale) replaced by leaf(op, query, scale), also inside fallback and overlap
    groups (which keep their own query and scale)."""
    out = []
    for name, op, query, scale in ops:
        if op == "fallback":
            query = {**query, **{part: map_leaf_ops(query[part], leaf) for part in ("primary", "fallback")}}
        elif op == "overlap":
            query = {**query, "groups": [map_leaf_ops(g, leaf) for g in query["groups"]]}
        else:
            query, scale = leaf(op, query, scale)
        out.append((name, op, query, scale))
    return out


def prefix_rule(rule: dict, query: dict, scale: float, prefix: int, isl: int) -> tuple[dict, float]:
    """One op under its models.yaml `cached_prefix` rule, `prefix` of `isl` tokens cached: the rule's length field
    at the whole or the new length, the prefix as a query field where the op takes it, the causal share
    1 - (prefix / isl)^2 where the op's kernel runs causally over both."""
    query = {**query, rule["length"]: isl if rule["at"] == "whole" else isl - prefix}
    if rule.get("prefix"):
        query["prefix"] = prefix
    if rule.get("causal_share"):
        scale *= 1 - (prefix / isl) ** 2
    return query, scale


def with_prefix(ops: list, prefix: int, isl: int, rules: dict, *, where: str, strict: bool = True) -> list:
    """A context pass's ops with `prefix` of each request's `isl` cached, per op kind as `rules` (models.yaml
    `cached_prefix`) say (also inside fallback / overlap groups); `strict`: an op kind that sees the sequence without
    a rule is refused rather than priced as if nothing were cached (else it is kept as it is)."""
    def leaf(op, query, scale):
        if op in rules:
            return prefix_rule(rules[op], query, scale, prefix, isl)
        if strict and any(field in query for field in SEQUENCE_FIELDS):
            raise UnsupportedModelError(f"{where}: a cached prefix is not priced for the {op} op "
                                        f"({MODELS_YAML.name} `cached_prefix` has no rule for it)")
        return query, scale

    return map_leaf_ops(ops, leaf)


@dataclass(frozen=True)
class CachedPrefix:
    """`prefix` of each sequence's `length` tokens cached, priced per op kind by `rules`; `strict` as `with_prefix`."""

    prefix: int
    length: int
    rules: dict
    strict: bool = True


def prompt_prefix(prefix: int, isl: int) -> CachedPrefix | None:
    """A prefill pass's cached prefix under every models.yaml rule (None where nothing is cached)."""
    return CachedPrefix(prefix, isl, catalog()["cached_prefix"]) if prefix else None


def causal_prefix(cached: int, length: int) -> CachedPrefix | None:
    """A mixed step's `cached` chunk tokens of its whole `length`, seen only by the causal MLA ops (the rules with
    `causal_share`: the MLA module, context MLA), as 0.12.0 prices a mixed step's MLA block (probed per op: Kimi-K3
    and DeepSeek-V3 on vLLM's module, DeepSeek-V3's granular block on sglang, with and without context parallelism);
    other ops keep the new tokens."""
    causal = {op: rule for op, rule in catalog()["cached_prefix"].items() if rule.get("causal_share")}
    return CachedPrefix(cached, length, causal, strict=False) if cached else None


def cached_pass(ops: list, cached: CachedPrefix | None, *, where: str) -> list:
    """`ops` under the cached prefix; the ops themselves where nothing is cached."""
    if cached is None:
        return ops
    return with_prefix(ops, cached.prefix, cached.length, cached.rules, where=where, strict=cached.strict)
