"""The small expression language of the YAML specs that size a model.

ledger/matrix/needs.yaml (which ops a matrix row needs) and estimator/models/memory.yaml (what a deployment holds
per GPU) both write shapes as arithmetic over config dims; one evaluator keeps them the same language and
keeps the specs data, not code: names, + - * / // %, comparisons, and/or, max/min, nothing else.
"""

from __future__ import annotations

import ast
import operator
from functools import lru_cache
from typing import Any


class ConfigExprError(ValueError):
    """A spec expression or a model config that cannot be evaluated (the message names the file and key)."""


_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Div: operator.truediv, ast.Mod: operator.mod}
_COMPARE = {ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Eq: operator.eq, ast.NotEq: operator.ne}
_CALLS = {"max": max, "min": min}


def evaluate(expr: str, names: dict[str, Any], where: str) -> Any:
    """Arithmetic/comparison/and-or over `names` (no attribute access, no other calls)."""

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise ConfigExprError(f"{where}: unknown name {node.id!r} in {expr!r}")
            return names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.BoolOp):
            values = [walk(v) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
            return _COMPARE[type(node.ops[0])](walk(node.left), walk(node.comparators[0]))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS:
            return _CALLS[node.func.id](*(walk(a) for a in node.args))
        raise ConfigExprError(f"{where}: unsupported expression {expr!r}")

    try:
        return walk(_parse(str(expr)))
    except SyntaxError:
        raise ConfigExprError(f"{where}: not an expression: {expr!r}") from None


@lru_cache(maxsize=4096)
def _parse(text: str) -> ast.Expression:
    """Specs repeat a few expressions over many deployments (a plan search sizes thousands): parse each once."""
    return ast.parse(text, mode="eval")
