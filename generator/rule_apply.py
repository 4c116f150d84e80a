"""Order rules by what they read and write, then apply them to the per-role parameters (fail closed)."""

from __future__ import annotations

import copy
import heapq
from itertools import pairwise
from typing import Any

from perfledger.generator.errors import GeneratorError
from perfledger.generator.rule_parse import Rule
from perfledger.generator.schema import ROLES, Schema, check_value


def order_rules(rules: list[Rule], schema: Schema) -> list[Rule]:
    """Writers of a value run before its readers; writers of one value keep file order.

    A rule that reads its own target sees the value before it (the input, or an earlier writer's).
    Ties keep file order; a cycle is an error naming the rules involved.
    """
    writers: dict[tuple[str, str], list[int]] = {}
    for i, rule in enumerate(rules):
        for ident in rule.writes():
            writers.setdefault(ident, []).append(i)
    edges: dict[int, set[int]] = {i: set() for i in range(len(rules))}
    for chain in writers.values():
        for a, b in pairwise(chain):
            edges[a].add(b)
    for i, rule in enumerate(rules):
        for ident in rule.reads(schema) - rule.writes():
            for w in writers.get(ident, []):
                edges[w].add(i)
    indegree = {i: 0 for i in edges}
    for targets in edges.values():
        for t in targets:
            indegree[t] += 1
    ready = [i for i, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for t in edges[i]:
            indegree[t] -= 1
            if indegree[t] == 0:
                heapq.heappush(ready, t)
    if len(order) != len(rules):
        stuck = [rules[i].where for i in edges if i not in order]
        raise GeneratorError(stuck[0], f"rules depend on each other in a cycle: {', '.join(stuck)}")
    return [rules[i] for i in order]


def _context(doc: dict[str, Any], roles: dict[str, dict[str, Any]], role: str | None, schema: Schema):
    def lookup(name: str) -> Any:
        head, _, key = name.partition(".")
        if key:
            holder = roles.get(head, {}) if head in ROLES else doc.get(head, {})
            return holder.get(key)
        if name in schema.top:
            return doc.get(name)
        return roles[role].get(name)
    return lookup


def apply_rules(rules: list[Rule], doc: dict[str, Any], schema: Schema) -> tuple[dict[str, Any], dict[str, str]]:
    """A new document with the rules applied; also `{key path: rule location}` for every value written."""
    out = copy.deepcopy(doc)
    roles: dict[str, dict[str, Any]] = out["Workers"]
    provenance: dict[str, str] = {}
    for rule in rules:
        for role in rule.roles if rule.roles is not None else (None,):
            if role is not None and role not in roles:
                continue
            lookup = _context(out, roles, role, schema)
            try:
                if not all(c.evaluate(lookup) for c in rule.conditions):
                    continue
                value = rule.expr.evaluate(lookup)
            except GeneratorError:
                raise
            except Exception as exc:  # any evaluation failure stops generation, naming the rule
                suffix = f" (role {role})" if role else ""
                raise GeneratorError(rule.where, f"{type(exc).__name__}: {exc}{suffix}") from None
            if role is None:
                section, key = rule.target.split(".")
                path, holder, spec = rule.target, out[section], schema.sections[section][key]
            else:
                path, holder, key, spec = f"Workers.{role}.{rule.target}", roles[role], rule.target, schema.roles[rule.target]
            if value is None:
                holder.pop(key, None)
                continue
            holder[key] = check_value(value, spec, f"{path} (set by {rule.where})")
            provenance[path] = rule.where
    return out, provenance
