"""A small, safe expression language (Python syntax subset) for rules, computed defaults and transforms.

Why not Jinja or eval: no attribute access on objects, no imports, no calls except a fixed function table,
and every name is known before evaluation, so a typo fails when the rule file loads, not in production.
`Section.key` is a dotted *name* looked up in nested dicts, never Python attribute access.
"""

from __future__ import annotations

import ast
import operator
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perfledger.generator.errors import GeneratorError

_LITERAL_ALIASES = {"true": True, "false": False, "null": None, "none": None}


def _cuda_graph_sizes(max_batch_size: Any) -> list[int]:
    """Capture sizes 1, 2, 4, 8, then every multiple of 8 up to 256, then of 16/32, always ending at the
    batch size; sorted and duplicate-free by construction (the reference could repeat sizes)."""
    top = int(max_batch_size or 0)
    if top <= 0:
        return []
    sizes = {s for s in (1, 2, 4) if s <= top}
    sizes.update(range(8, min(top, 256) + 1, 8))
    sizes.update(range(256, min(top, 512) + 1, 16))
    sizes.update(range(512, top + 1, 32))
    sizes.add(top)
    return sorted(sizes)


def _dns_label(text: Any) -> str:
    """Lower-case RFC-1123 label from free text (model names carry dots, slashes and capitals)."""
    label = re.sub(r"[^a-z0-9-]+", "-", str(text).lower()).strip("-")
    return re.sub(r"-{2,}", "-", label)[:40].strip("-") or "deployment"


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min, "max": max, "abs": abs, "int": int, "float": float, "str": str, "len": len, "bool": bool,
    "round_up": lambda x, m: ((int(x) + int(m) - 1) // int(m)) * int(m),
    "range_list": lambda a, b, step=1: list(range(int(a), int(b), int(step))),
    "unique_sorted": lambda xs: sorted(set(xs)),
    "cuda_graph_sizes": _cuda_graph_sizes,
    "basename": lambda s: posixpath.basename(str(s).rstrip("/")),
    "lower": lambda s: str(s).lower(),
    "dns_label": _dns_label,
}

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
           ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not}


def _dotted(node: ast.AST) -> str | None:
    """`A.b.c` as a string when the node is a pure chain of names, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


@dataclass(frozen=True)
class Expr:
    """A parsed expression; `names` are the dotted names it reads (functions and literals excluded)."""

    source: str
    tree: ast.Expression
    names: frozenset[str]

    def evaluate(self, lookup: Callable[[str], Any]) -> Any:
        """Evaluate with `lookup(name)` resolving every dotted name."""
        return _Evaluator(lookup).visit(self.tree.body)


def parse_expr(source: str, where: str) -> Expr:
    """Parse and vet an expression; unsupported syntax fails with `where` (file:line or key)."""
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise GeneratorError(where, f"cannot parse expression {source.strip()!r}: {exc.msg}") from None
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            name = _dotted(node)
            if name is None or "._" in name or name.startswith("_"):
                raise GeneratorError(where, f"attribute access is not allowed in {source.strip()!r}")
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or node.keywords:
                raise GeneratorError(where, f"only calls to {sorted(FUNCTIONS)} are allowed in {source.strip()!r}")
        elif not isinstance(node, _ALLOWED):
            raise GeneratorError(where, f"{type(node).__name__} is not allowed in {source.strip()!r}")
    for node in ast.walk(tree):
        name = _dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if name and name not in FUNCTIONS and name not in _LITERAL_ALIASES:
            names.add(name)
    # Drop prefixes of dotted names (`SlaConfig` inside `SlaConfig.isl`).
    names = {n for n in names if not any(o.startswith(n + ".") for o in names)}
    return Expr(source.strip(), tree, frozenset(names))


_ALLOWED = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.BinOp, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd,
            ast.Compare, ast.IfExp, ast.Name, ast.Load, ast.Constant, ast.List, ast.Tuple,
            *_BINOPS, *_CMPOPS)


class _Evaluator(ast.NodeVisitor):
    def __init__(self, lookup: Callable[[str], Any]):
        self.lookup = lookup

    def generic_visit(self, node: ast.AST) -> Any:  # pragma: no cover - parse_expr vets nodes first
        raise TypeError(f"{type(node).__name__} is not allowed")

    def visit_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def visit_Name(self, node: ast.Name) -> Any:
        if node.id in _LITERAL_ALIASES:
            return _LITERAL_ALIASES[node.id]
        return self.lookup(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        return self.lookup(_dotted(node))

    def visit_List(self, node: ast.List) -> list:
        return [self.visit(e) for e in node.elts]

    visit_Tuple = visit_List

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        value: Any = None
        for operand in node.values:
            value = self.visit(operand)
            if isinstance(node.op, ast.And) and not value:
                return value
            if isinstance(node.op, ast.Or) and value:
                return value
        return value

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        value = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            return not value
        return -value if isinstance(node.op, ast.USub) else +value

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        left, right = self.visit(node.left), self.visit(node.right)
        if isinstance(node.op, ast.Mult) and not all(isinstance(v, (int, float)) for v in (left, right)):
            raise TypeError("'*' is only defined on numbers here")
        return _BINOPS[type(node.op)](left, right)

    def visit_Compare(self, node: ast.Compare) -> bool:
        left = self.visit(node.left)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = self.visit(comp)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        return self.visit(node.body) if self.visit(node.test) else self.visit(node.orelse)

    def visit_Call(self, node: ast.Call) -> Any:
        return FUNCTIONS[node.func.id](*[self.visit(a) for a in node.args])
