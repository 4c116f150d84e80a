"""Parse a `.rule` file: `[scope] key = expr`, `Section.key = expr`, `when cond:` blocks, `#` comments.

Every name a rule reads or writes is checked against the schema when the file loads, so a typo fails
with the file and line instead of silently evaluating to nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perfledger.generator.errors import GeneratorError
from perfledger.generator.expr import Expr, parse_expr
from perfledger.generator.schema import DEFAULT_SCOPE, ROLES, Schema

_ASSIGN = re.compile(r"^(?:\[(?P<scope>[^\]]*)\]\s*)?(?P<target>[A-Za-z_][A-Za-z0-9_.]*)\s*=(?!=)\s*(?P<expr>.+)$")
_INCLUDE = re.compile(r"^include\s+(?P<name>[A-Za-z0-9][A-Za-z0-9_-]*)$")
_WHEN = re.compile(r"^when\s+(?P<cond>.+):$")


@dataclass(frozen=True)
class Rule:
    """One assignment. `roles` is None for a global (`Section.key`) write."""

    where: str
    roles: tuple[str, ...] | None
    target: str
    expr: Expr
    conditions: tuple[Expr, ...]

    def writes(self) -> set[tuple[str, str]]:
        if self.roles is None:
            section, key = self.target.split(".")
            return {(section, key)}
        return {(r, self.target) for r in self.roles}

    def reads(self, schema: Schema) -> set[tuple[str, str]]:
        ids: set[tuple[str, str]] = set()
        for expr in (self.expr, *self.conditions):
            for name in expr.names:
                head, _, key = name.partition(".")
                if key:
                    ids.add((head, key))
                elif name in schema.top:
                    ids.add(("top", name))
                else:
                    ids.update((r, name) for r in self.roles or ())
        return ids


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return line[:i].rstrip()
    return line.rstrip()


def _check_names(expr: Expr, roles: tuple[str, ...] | None, schema: Schema, where: str) -> None:
    for name in expr.names:
        head, _, key = name.partition(".")
        if key:
            ok = (head in schema.sections and key in schema.sections[head]) or (head in ROLES and key in schema.roles)
        else:
            ok = name in schema.top or (roles is not None and name in schema.roles)
        if not ok:
            raise GeneratorError(where, f"unknown name {name!r} in {expr.source!r}")


def _scope(text: str | None, where: str) -> tuple[str, ...]:
    if text is None:
        return DEFAULT_SCOPE
    roles = tuple(r.strip() for r in text.replace("_", ",").split(",") if r.strip())
    bad = [r for r in roles if r not in ROLES]
    if bad or not roles:
        raise GeneratorError(where, f"scope roles must be from {list(ROLES)}, got {text!r}")
    return roles


def parse_rules(text: str, source: str, schema: Schema,
                include: Callable[[str, str], list[Rule]] | None = None) -> list[Rule]:
    """Rules in file order; `source` (the file name) prefixes every error location.

    `include NAME` (top level) splices in the rules `include(NAME, where)` returns, at that point.
    """
    rules: list[Rule] = []
    blocks: list[tuple[int, Expr]] = []  # (indent of the `when` line, condition)
    for number, raw in enumerate(text.splitlines(), start=1):
        where = f"{source}:{number}"
        line = _strip_comment(raw)
        if not line.strip():
            continue
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise GeneratorError(where, "indent with spaces, not tabs")
        indent = len(line) - len(line.lstrip())
        while blocks and indent <= blocks[-1][0]:
            blocks.pop()
        body = line.strip()
        if inc := _INCLUDE.match(body):
            if indent or include is None:
                raise GeneratorError(where, "include is only allowed at the top level of a rule-set file")
            rules.extend(include(inc["name"], where))
            continue
        if when := _WHEN.match(body):
            cond = parse_expr(when["cond"], where)
            _check_names(cond, ROLES, schema, where)
            blocks.append((indent, cond))
            continue
        assign = _ASSIGN.match(body)
        if not assign:
            raise GeneratorError(where, f"expected `[scope] key = expr`, `Section.key = expr` or `when cond:`, got {body!r}")
        target = assign["target"]
        if "." in target:
            section, _, key = target.partition(".")
            if assign["scope"] is not None or section not in schema.sections or key not in schema.sections[section]:
                raise GeneratorError(where, f"global write {target!r} must be an unscoped Section.key from the schema")
            roles = None
        else:
            if target not in schema.roles:
                raise GeneratorError(where, f"unknown worker key {target!r}")
            roles = _scope(assign["scope"], where)
        expr = parse_expr(assign["expr"], where)
        conditions = tuple(c for _, c in blocks)
        for e in (expr, *conditions):
            _check_names(e, roles, schema, where)
        rules.append(Rule(where, roles, target, expr, conditions))
    return rules


RULES_DIR = Path(__file__).parent / "rules"


def load_rule_set(rule_set: str, backend: str, schema: Schema, where: str = "rule", depth: int = 0) -> list[Rule]:
    """Parse generator/rules/<set>/<backend>.rule with its includes (set names cannot leave rules/)."""
    path = RULES_DIR / rule_set / f"{backend}.rule"
    if "/" in rule_set or rule_set.startswith(".") or not path.is_file() or (depth == 0 and rule_set == "common"):
        sets = sorted(p.name for p in RULES_DIR.iterdir() if (p / f"{backend}.rule").is_file() and p.name != "common")
        raise GeneratorError(where, f"no rule set {rule_set!r} for {backend}; available: {', '.join(sets)}")
    if depth > 4:
        raise GeneratorError(where, "include nesting deeper than 4 (a cycle?)")
    source = f"generator/rules/{rule_set}/{backend}.rule"
    return parse_rules(path.read_text(encoding="utf-8"), source, schema,
                       lambda name, at: load_rule_set(name, backend, schema, at, depth + 1))
