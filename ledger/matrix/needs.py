"""The ops a model needs priced for one support-matrix row, derived from its HF config and needs.yaml.

A row is PASS only when every op of the model's layers is priced; deriving the list from the model's
own config (GEMMs of its linear layers, GQA or MLA attention in context and generation, MoE, the comm
of the mode's parallel layout) keeps a row from passing because a need was never asked.
"""

from __future__ import annotations

import ast
import json
import operator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

NEEDS_FILE = Path(__file__).with_name("needs.yaml")
PHASES = ("context", "generation")


class NeedsError(ValueError):
    """A needs.yaml entry or a model config that cannot be turned into op queries (names file and key)."""


@dataclass(frozen=True)
class Need:
    """One op query a row needs: `name` (layer op), estimator `op`, perf `table`, phase and query values."""

    name: str
    op: str
    table: str
    phase: str
    query: tuple[tuple[str, Any], ...]


@cache
def load_needs(path: Path = NEEDS_FILE) -> dict:
    return yaml.safe_load(Path(path).read_text())


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
                raise NeedsError(f"{where}: unknown name {node.id!r} in {expr!r}")
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
        raise NeedsError(f"{where}: unsupported expression {expr!r}")

    try:
        return walk(ast.parse(str(expr), mode="eval"))
    except SyntaxError:
        raise NeedsError(f"{where}: not an expression: {expr!r}") from None


def model_dims(config: dict, source: str, fields: dict[str, list]) -> dict[str, Any]:
    """needs.yaml `dims` resolved against an HF config (its text_config first, when nested)."""
    layers = [config.get("text_config") or {}, config]
    dims: dict[str, Any] = {}
    for dim, keys in fields.items():
        for key in keys:
            if not isinstance(key, str):
                dims[dim] = key
                break
            hit = next((layer[key] for layer in layers if layer.get(key) is not None), None)
            if hit is not None:
                dims[dim] = hit
                break
        else:
            raise NeedsError(f"{source}: none of {keys} present (needs.yaml dims.{dim})")
    if not dims.get("head_dim"):
        dims["head_dim"] = dims["hidden"] // dims["heads"]
    return dims


def load_config(model: str) -> tuple[dict, str]:
    """The model's HF config.json (wheel model_configs/, then ../shared/aic/model_configs/)."""
    from estimator.assembly import model_config_path
    from estimator.errors import EstimatorError

    try:
        path = model_config_path(model)
    except EstimatorError as exc:
        raise NeedsError(str(exc)) from None
    return json.loads(path.read_text()), path.name


def _value(raw: Any, names: dict, quant: dict, where: str) -> Any:
    if isinstance(raw, str) and raw.startswith("quant."):
        key = raw.split(".", 1)[1]
        if key not in quant:
            raise NeedsError(f"{where}: no quant label {key!r} (known: {', '.join(quant)})")
        return quant[key]
    if isinstance(raw, str):
        value = evaluate(raw, names, where)
        return int(value) if isinstance(value, float) and value.is_integer() else value
    return raw


def derive_needs(architecture: str, dims: dict, quant: dict, mode: str, doc: dict | None = None) -> list[Need]:
    """Every op query of one layer stack for `mode` (agg/disagg), in layer order, context then generation."""
    doc = doc or load_needs()
    if architecture not in doc["architectures"]:
        raise NeedsError(f"{NEEDS_FILE.name}: architecture {architecture!r} not in architectures "
                         f"(known: {', '.join(doc['architectures'])})")
    if mode not in doc["deployments"]:
        raise NeedsError(f"{NEEDS_FILE.name}: no deployments.{mode}")
    labels = {**doc["quant_defaults"], **quant}
    out = []
    for phase in PHASES:
        names = {**dims, **doc["deployments"][mode][phase]}
        for component in doc["architectures"][architecture]:
            for i, t in enumerate(doc["components"][component]):
                where = f"{NEEDS_FILE.name}: components.{component}[{i}]"
                if phase not in t.get("phases", PHASES) or ("when" in t and not evaluate(t["when"], names, f"{where}.when")):
                    continue
                query = tuple((k, _value(v, names, labels, f"{where}.query.{k}")) for k, v in t["query"].items())
                query += tuple((t.get("fixed") or {}).items())
                out.append(Need(t["name"], t["op"], t.get("table", t["op"]), phase, query))
    return out
