"""Load backend_config_mapping.yaml: unified parameter -> backend flag, resolved for one version."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from packaging.version import Version

from perfledger.generator.errors import GeneratorError
from perfledger.generator.expr import Expr, parse_expr
from perfledger.generator.versions import in_span, parse_version
from perfledger.generator.yamlio import load_package_yaml

MAPPING_FILE = "generator/backend_config_mapping.yaml"
BACKENDS = ("vllm", "sglang", "trtllm")
_SPEC_KEYS = {"flag", "yaml", "kind", "value", "since", "until", "renamed_to", "json_key"}
_KINDS = {"value", "switch", "list", "json"}


@dataclass(frozen=True)
class FlagSpec:
    """One span of a parameter's spelling on one backend."""

    name: str
    target: str  # "cli" (a command-line flag) or "yaml" (a dotted path in the TRT-LLM engine file)
    kind: str
    value: Expr | None
    since: str | None
    until: str | None
    renamed_to: str | None
    json_key: str | None


@dataclass(frozen=True)
class ParamSpec:
    """A unified worker parameter: its schema entry plus its spelling per backend."""

    key: str
    schema: dict[str, Any]
    flags: dict[str, tuple[FlagSpec, ...]]

    def flag_for(self, backend: str, version: str) -> tuple[str, FlagSpec] | None:
        """The flag name at `version`, following renames; None when unavailable there."""
        v = parse_version(version, "version")
        for spec in self.flags.get(backend, ()):
            if in_span(v, spec.since, spec.until):
                return spec.name, spec
            if spec.renamed_to and spec.until and v >= Version(spec.until):
                return spec.renamed_to, spec
        return None


@dataclass(frozen=True)
class Mapping:
    backends: dict[str, dict[str, Any]]
    params: dict[str, ParamSpec]


def _flag_spec(raw: Any, where: str) -> FlagSpec:
    if not isinstance(raw, dict) or not raw.keys() <= _SPEC_KEYS or ("flag" in raw) == ("yaml" in raw):
        raise GeneratorError(where, f"expected a mapping with one of flag/yaml and keys from {sorted(_SPEC_KEYS)}")
    kind = raw.get("kind", "value")
    if kind not in _KINDS or (kind == "json") != ("json_key" in raw):
        raise GeneratorError(where, f"kind must be one of {sorted(_KINDS)}; json (only) needs json_key")
    for bound in ("since", "until"):
        if bound in raw:
            parse_version(raw[bound], f"{where}.{bound}")
    value = parse_expr(str(raw["value"]), f"{where}.value") if "value" in raw else None
    return FlagSpec(raw.get("flag") or raw["yaml"], "cli" if "flag" in raw else "yaml", kind, value,
                    raw.get("since"), raw.get("until"), raw.get("renamed_to"), raw.get("json_key"))


def parse_mapping(raw: Any, where: str = MAPPING_FILE) -> Mapping:
    """Validate the mapping document; every problem names the file and the parameter."""
    if not isinstance(raw, dict) or set(raw) != {"backends", "parameters"}:
        raise GeneratorError(where, "expected top-level keys: backends, parameters")
    if set(raw["backends"]) != set(BACKENDS):
        raise GeneratorError(f"{where}: backends", f"expected exactly {list(BACKENDS)}")
    params: dict[str, ParamSpec] = {}
    for i, entry in enumerate(raw["parameters"]):
        here = f"{where}: parameters[{i}]"
        if not isinstance(entry, dict) or "key" not in entry or "type" not in entry:
            raise GeneratorError(here, "each parameter needs key and type")
        key = entry["key"]
        if key in params:
            raise GeneratorError(here, f"duplicate parameter {key!r}")
        unknown = set(entry) - {"key", "type", "help", "choices", "min", "max", *BACKENDS}
        if unknown:
            raise GeneratorError(here, f"unknown fields {sorted(unknown)} in {key!r}")
        flags = {}
        for backend in BACKENDS:
            spans = entry.get(backend) or []
            spans = spans if isinstance(spans, list) else [spans]
            flags[backend] = tuple(_flag_spec(s, f"{here}.{backend}") for s in spans)
        schema = {k: entry[k] for k in ("type", "help", "choices", "min", "max") if k in entry}
        params[key] = ParamSpec(key, schema, flags)
    return Mapping(raw["backends"], params)


@lru_cache(maxsize=1)
def load_mapping() -> Mapping:
    """The packaged mapping, parsed once."""
    return parse_mapping(load_package_yaml("backend_config_mapping.yaml"))
