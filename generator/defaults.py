"""Fill defaults after validation: literal defaults, then computed ones, then the required check.

Computed defaults are expressions (generator.expr) over keys declared earlier and the resolved runtime,
so a string default is always a real string (the reference rendered bare-word defaults as None).
"""

from __future__ import annotations

import copy
from typing import Any

from perfledger.generator.errors import GeneratorError
from perfledger.generator.expr import parse_expr
from perfledger.generator.schema import SCHEMA_FILE, check_value, load_schema


class _Missing(LookupError):
    pass


def _lookup_in(doc: dict[str, Any], extra: dict[str, Any]):
    def lookup(name: str) -> Any:
        if name in extra:
            return extra[name]
        node: Any = doc
        for part in name.split("."):
            if not isinstance(node, dict) or part not in node:
                raise _Missing(name)
            node = node[part]
        return node
    return lookup


def _fill(doc: dict[str, Any], path: str, holder: dict[str, Any], key: str, spec: dict[str, Any],
          extra: dict[str, Any]) -> None:
    if key in holder:
        return
    if "default" in spec:
        holder[key] = check_value(copy.deepcopy(spec["default"]), spec, f"{SCHEMA_FILE}: {path}")
    elif "computed" in spec:
        expr = parse_expr(spec["computed"], f"{SCHEMA_FILE}: {path}.computed")
        try:
            value = expr.evaluate(_lookup_in(doc, extra))
        except _Missing as exc:
            raise GeneratorError(str(exc.args[0]), f"required (needed to compute {path})") from None
        holder[key] = check_value(value, spec, path)


def apply_defaults(doc: dict[str, Any], runtime: dict[str, Any]) -> dict[str, Any]:
    """A new document with every default filled; `runtime` names resolved values computed defaults read."""
    schema = load_schema()
    out = copy.deepcopy(doc)
    for key, spec in schema.top.items():
        _fill(out, key, out, key, spec, runtime)
    for section, fields in schema.sections.items():
        holder = out.setdefault(section, {})
        for key, spec in fields.items():
            _fill(out, f"{section}.{key}", holder, key, spec, runtime)
    for key, spec in schema.top.items():
        if spec.get("required") and key not in out:
            raise GeneratorError(key, "required key is missing")
    for section, fields in schema.sections.items():
        for key, spec in fields.items():
            if spec.get("required") and key not in out[section]:
                raise GeneratorError(f"{section}.{key}", "required key is missing")
    if not out.get("Workers"):
        raise GeneratorError("Workers", "required: at least one role (prefill + decode, or agg)")
    return canonical(out)


def canonical(doc: dict[str, Any]) -> dict[str, Any]:
    """Top-level keys in schema order (top keys, sections, Workers) so generator_config.yaml is stable."""
    schema = load_schema()
    order = [*schema.top, *schema.sections, "Workers"]
    return {key: doc[key] for key in order if key in doc}
