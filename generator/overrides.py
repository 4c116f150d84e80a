"""`--set Section.key.sub=VALUE` overrides: the value is YAML (safe loader), the command line wins."""

from __future__ import annotations

import copy
import re
from typing import Any

from perfledger.generator.errors import GeneratorError, UsageError
from perfledger.generator.yamlio import parse_yaml

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$")


def parse_override(text: str) -> tuple[list[str], Any]:
    """'A.b=8' -> (['A', 'b'], 8); a missing '=' or a malformed key is a usage error."""
    key, sep, raw = text.partition("=")
    if not sep or not _KEY.match(key):
        raise UsageError("--set", f"expected Section.key=VALUE, got {text!r}")
    return key.split("."), parse_yaml(raw, f"--set {key}") if raw.strip() else ""


def apply_overrides(doc: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """A new document with each override set in order, creating sections as needed."""
    out = copy.deepcopy(doc)
    for text in overrides:
        path, value = parse_override(text)
        node = out
        for depth, part in enumerate(path[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise GeneratorError(".".join(path[: depth + 1]), f"--set {text!r} descends into a non-mapping value")
        node[path[-1]] = value
    return out
