"""Translate one role's unified parameters into engine CLI tokens and engine-YAML keys for one version."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from perfledger.generator.errors import GeneratorError
from perfledger.generator.mapping import Mapping


@dataclass
class EngineFlags:
    """What one role's parameters become: argv tokens, nested engine-YAML keys, and what had no flag."""

    cli: list[str] = field(default_factory=list)
    engine: dict[str, Any] = field(default_factory=dict)
    unsupported: list[str] = field(default_factory=list)


_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def flag_value(text: str, where: str) -> str:
    """A string that follows a flag must not look like a flag itself (argument injection)."""
    if text.startswith("-") and not _NUMBER.match(text):
        raise GeneratorError(where, f"value {text!r} starts with '-' and would be read as a flag")
    return text


def scalar(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return flag_value(value, where)
    raise GeneratorError(where, f"cannot pass {type(value).__name__} {value!r} as a single flag value")


def set_path(tree: dict[str, Any], dotted: str, value: Any, where: str) -> None:
    """tree['a']['b'] = value for 'a.b'; a clash between a value and a section is an error."""
    *parents, leaf = dotted.split(".")
    node = tree
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise GeneratorError(where, f"engine key {dotted!r} clashes with a value at {part!r}")
    if leaf in node:
        raise GeneratorError(where, f"engine key {dotted!r} is set twice")
    node[leaf] = value


def translate(params: dict[str, Any], backend: str, version: str, mapping: Mapping, where: str) -> EngineFlags:
    """Emit flags in mapping order for every parameter with a value (no mapping-side defaults)."""
    out = EngineFlags()
    json_groups: dict[str, dict[str, Any]] = {}
    for key, spec in mapping.params.items():
        if key not in params:
            continue
        value, here = params[key], f"{where}.{key}"
        resolved = spec.flag_for(backend, version)
        if resolved is None:
            out.unsupported.append(key)
            continue
        name, flag = resolved
        if flag.value is not None:
            value = flag.value.evaluate(lambda n, given=value: given if n == "v" else params.get(n))
        if flag.target == "yaml":
            set_path(out.engine, name, value, here)
        elif flag.kind == "switch":
            out.cli.extend([name] if value else [])
        elif flag.kind == "list":
            if len(set(value)) != len(value):
                raise GeneratorError(here, f"duplicate values in {value}")
            out.cli.extend([name, *(scalar(v, here) for v in value)] if value else [])
        elif flag.kind == "json":
            json_groups.setdefault(name, {})[flag.json_key] = value
        else:
            out.cli.extend([name, scalar(value, here)])
    for name, obj in json_groups.items():
        out.cli.extend([name, json.dumps(obj, separators=(",", ":"))])
    return out
