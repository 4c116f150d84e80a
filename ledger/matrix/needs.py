"""The ops a model needs priced for one support-matrix row, derived from its HF config and needs.yaml.

A row is PASS only when every op of the model's layers is priced; deriving the list from the model's
own config (GEMMs of its linear layers, GQA or MLA attention in context and generation, MoE, the comm
of the mode's parallel layout) keeps a row from passing because a need was never asked. A need may list
alternatives (`any_of`, resolved in ledger/matrix/choices.py) where backends measure one layer op differently.
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


def quant_labels(doc: dict, quant: dict) -> dict:
    """The spec's quant labels over needs.yaml's defaults, plus `quant_derived` roles the spec leaves unset
    (e.g. the MLA BMM quant follows the GEMM quant: bf16 stays bf16, any other label runs the BMMs in fp8)."""
    labels = {**doc["quant_defaults"], **quant}
    for role, rule in (doc.get("quant_derived") or {}).items():
        if role not in quant:
            source = labels.get(rule["from"])
            labels[role] = rule["map"].get(source, rule["map"].get("*", source))
    return labels


def _need(t: dict, names: dict, labels: dict, phase: str, where: str) -> Need:
    """One op template (name, op, table, query, fixed) evaluated at the phase's names."""
    if not isinstance(t, dict) or "op" not in t:
        raise NeedsError(f"{where}: expected a mapping with an `op` (or `any_of`)")
    query = tuple((k, _value(v, names, labels, f"{where}.query.{k}")) for k, v in (t.get("query") or {}).items())
    query += tuple((t.get("fixed") or {}).items())
    return Need(t.get("name", t["op"]), t["op"], t.get("table", t["op"]), phase, query)


def _choice(t: dict, names: dict, labels: dict, phase: str, where: str):
    """An `any_of` need: options in order, each {ops: [op templates], backends: [..] (optional)}."""
    from ledger.matrix.choices import Choice, Option

    if "op" in t or not isinstance(t["any_of"], list) or not t["any_of"]:
        raise NeedsError(f"{where}.any_of: expected a non-empty list of options (and no `op` beside it)")
    if not isinstance(t.get("name"), str):
        raise NeedsError(f"{where}.name: an any_of need needs a name (the layer op its options price)")
    options = []
    for j, raw in enumerate(t["any_of"]):
        at = f"{where}.any_of[{j}]"
        if not isinstance(raw, dict) or set(raw) - {"ops", "backends"} or not isinstance(raw.get("ops"), list) \
                or not raw["ops"]:
            raise NeedsError(f"{at}: expected {{ops: [op templates], backends: [names] (optional)}}")
        backends = raw.get("backends") or []
        if not isinstance(backends, list) or not all(isinstance(b, str) for b in backends):
            raise NeedsError(f"{at}.backends: expected a list of backend names")
        ops = [_need(op, names, labels, phase, f"{at}.ops[{k}]") for k, op in enumerate(raw["ops"])
               if not (isinstance(op, dict) and "when" in op and not evaluate(op["when"], names, f"{at}.ops[{k}].when"))]
        options.append(Option(tuple(ops), tuple(backends)))
    return Choice(t["name"], phase, tuple(options))


def derive_needs(architecture: str, dims: dict, quant: dict, mode: str, doc: dict | None = None) -> list:
    """Every op query (Need) or alternative set (choices.Choice) of one layer stack for `mode` (agg/disagg),
    in layer order, context then generation."""
    doc = doc or load_needs()
    if architecture not in doc["architectures"]:
        raise NeedsError(f"{NEEDS_FILE.name}: architecture {architecture!r} not in architectures "
                         f"(known: {', '.join(doc['architectures'])})")
    if mode not in doc["deployments"]:
        raise NeedsError(f"{NEEDS_FILE.name}: no deployments.{mode}")
    labels = quant_labels(doc, quant)
    out = []
    for phase in PHASES:
        names = {**dims, **doc["deployments"][mode][phase]}
        for component in doc["architectures"][architecture]:
            for i, t in enumerate(doc["components"][component]):
                where = f"{NEEDS_FILE.name}: components.{component}[{i}]"
                if phase not in t.get("phases", PHASES) or ("when" in t and not evaluate(t["when"], names, f"{where}.when")):
                    continue
                out.append(_choice(t, names, labels, phase, where) if "any_of" in t else _need(t, names, labels, phase, where))
    return out
