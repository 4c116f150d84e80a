"""The input contract: deployment_config.yaml (+ mapping parameter types) checks keys, types and limits."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from perfledger.generator.errors import GeneratorError
from perfledger.generator.mapping import load_mapping
from perfledger.generator.yamlio import load_package_yaml

SCHEMA_FILE = "generator/deployment_config.yaml"
ROLES = ("prefill", "decode", "agg", "encode")  # encode: the multimodal encoder worker
DEFAULT_SCOPE = ("prefill", "decode", "agg")  # an unscoped role rule: the serving roles
_FORMATS = {
    "dns1123": re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"),
    "env_name": re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$"),
    "rule_set": re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$"),  # a folder name: no path traversal
}
_SPEC_KEYS = {"type", "help", "required", "default", "computed", "choices", "min", "max", "format", "backends"}
_TYPES = {"str", "int", "float", "bool", "list_int", "list_str", "dict", "env"}


@dataclass(frozen=True)
class Schema:
    """Field specs by location: top-level keys, section keys, and Workers.<role> keys."""

    top: dict[str, dict[str, Any]]
    sections: dict[str, dict[str, dict[str, Any]]]
    roles: dict[str, dict[str, Any]]
    unsupported: dict[str, str] = field(default_factory=dict)  # reference inputs refused on purpose: why

    def spec(self, path: str) -> dict[str, Any] | None:
        """The spec of a dotted key path (`ServiceConfig.port`, `Workers.decode.max_batch_size`)."""
        parts = path.split(".")
        if len(parts) == 1:
            return self.top.get(parts[0])
        if parts[0] == "Workers" and len(parts) == 3 and parts[1] in ROLES:
            return self.roles.get(parts[2])
        return self.sections.get(parts[0], {}).get(parts[1]) if len(parts) == 2 else None


def _check_specs(specs: dict[str, Any], where: str) -> dict[str, dict[str, Any]]:
    for name, spec in specs.items():
        if not isinstance(spec, dict) or spec.get("type") not in _TYPES or not spec.keys() <= _SPEC_KEYS:
            raise GeneratorError(f"{where}.{name}", f"needs a type from {sorted(_TYPES)} and keys from {sorted(_SPEC_KEYS)}")
        if sum(k in spec for k in ("required", "default", "computed")) > 1:
            raise GeneratorError(f"{where}.{name}", "use only one of required, default, computed")
    return specs


@lru_cache(maxsize=1)
def load_schema() -> Schema:
    """deployment_config.yaml plus every mapping parameter as a Workers.<role> key."""
    raw = load_package_yaml("deployment_config.yaml")
    sections = {s: _check_specs(f, f"{SCHEMA_FILE}: sections.{s}") for s, f in raw["sections"].items()}
    roles = dict(_check_specs(raw["roles"], f"{SCHEMA_FILE}: roles"))
    for key, param in load_mapping().params.items():
        if key in roles:
            raise GeneratorError(f"{SCHEMA_FILE}: roles.{key}", "also declared in backend_config_mapping.yaml")
        roles[key] = param.schema
    return Schema(_check_specs(raw["top"], f"{SCHEMA_FILE}: top"), sections, roles, dict(raw.get("unsupported", {})))


def did_you_mean(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(sorted(known))}"


def check_value(value: Any, spec: dict[str, Any], path: str) -> Any:
    """Type and limit check of one value; returns it (floats accept ints). Never coerces to str."""
    kind = spec["type"]
    if value is None:
        raise GeneratorError(path, f"null is not allowed (expected {kind}); remove the key to use its default")
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "list_int": isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value),
        "list_str": isinstance(value, list) and all(isinstance(v, str) for v in value),
        "dict": isinstance(value, dict) and all(isinstance(k, str) for k in value),
        "env": isinstance(value, dict) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                               for v in value.values()),
    }[kind]
    if not ok:
        hint = " (quote it in YAML)" if kind == "str" else ""
        raise GeneratorError(path, f"expected {kind}, got {type(value).__name__} {value!r}{hint}")
    if kind == "str" and "\x00" in value:
        raise GeneratorError(path, "contains a NUL character")
    if kind == "list_str" and any("\x00" in v for v in value):
        raise GeneratorError(path, "contains a NUL character")
    if kind == "list_int" and len(set(value)) != len(value):
        raise GeneratorError(path, f"duplicate values in {value}")
    if "choices" in spec and value not in spec["choices"]:
        raise GeneratorError(path, f"{value!r} is not one of {spec['choices']}")
    if "min" in spec and value < spec["min"] or "max" in spec and value > spec["max"]:
        raise GeneratorError(path, f"{value!r} is outside [{spec.get('min', '-inf')}, {spec.get('max', 'inf')}]")
    fmt = spec.get("format")
    if fmt and not _FORMATS[fmt].match(value):
        raise GeneratorError(path, f"{value!r} is not a valid {fmt} name")
    if kind == "env":
        for name in value:
            if not isinstance(name, str) or not _FORMATS["env_name"].match(name):
                raise GeneratorError(f"{path}.{name}", "not a valid environment variable name")
        return {k: str(v) for k, v in value.items()}
    return value


def check_document(doc: Any, where: str) -> None:
    """Reject unknown keys (full path + did-you-mean), wrong types and misplaced sections."""
    schema = load_schema()
    if not isinstance(doc, dict):
        raise GeneratorError(where, "the deployment YAML must be a mapping of sections")
    known = [*schema.top, *schema.sections, "Workers"]
    for key, value in doc.items():
        if key in schema.top:
            check_value(value, schema.top[key], key)
        elif key == "Workers":
            _check_workers(value, schema)
        elif key in schema.sections:
            if not isinstance(value, dict):
                raise GeneratorError(key, f"expected a mapping, got {type(value).__name__}")
            for sub, item in value.items():
                fields = schema.sections[key]
                if sub not in fields:
                    raise GeneratorError(f"{key}.{sub}", "unknown key" + did_you_mean(str(sub), list(fields)))
                check_value(item, fields[sub], f"{key}.{sub}")
        elif key in schema.unsupported:
            raise GeneratorError(str(key), f"not supported: {schema.unsupported[key]}")
        else:
            raise GeneratorError(str(key), "unknown top-level key" + did_you_mean(str(key), known))


def check_backend_keys(doc: dict[str, Any], backend: str) -> None:
    """A worker key only some backends use (`backends:` in the schema) is an error elsewhere, not a silent drop."""
    schema = load_schema()
    for role, params in doc.get("Workers", {}).items():
        for key in params:
            users = schema.roles[key].get("backends")
            if users and backend not in users:
                raise GeneratorError(f"Workers.{role}.{key}", f"only used by {', '.join(users)}, not {backend}")


def _check_workers(workers: Any, schema: Schema) -> None:
    if not isinstance(workers, dict) or not workers:
        raise GeneratorError("Workers", "expected a mapping of roles (prefill/decode or agg, optional encode)")
    for role, params in workers.items():
        if role not in ROLES:
            raise GeneratorError(f"Workers.{role}", "unknown role" + did_you_mean(str(role), list(ROLES)))
        if not isinstance(params, dict):
            raise GeneratorError(f"Workers.{role}", f"expected a mapping, got {type(params).__name__}")
        for key, value in params.items():
            if key not in schema.roles:
                raise GeneratorError(f"Workers.{role}.{key}",
                                     "unknown worker key" + did_you_mean(str(key), list(schema.roles)))
            check_value(value, schema.roles[key], f"Workers.{role}.{key}")
