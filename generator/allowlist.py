"""Check generated flags and engine-YAML keys against the per-version allow-lists (allowlists/*.yaml)."""

from __future__ import annotations

from functools import cache
from typing import Any

from packaging.version import Version

from perfledger.generator.errors import GeneratorError
from perfledger.generator.yamlio import load_package_yaml
from perfledger.versions import version_key


@cache
def allowed(backend: str, version: str) -> frozenset[str]:
    """Flags / key paths accepted at `version` (an exact version with data), wrapper flags included."""
    data = load_package_yaml(f"allowlists/{backend}.yaml")
    where = f"generator/allowlists/{backend}.yaml"
    if version not in data["versions"]:
        raise GeneratorError(where, f"no entry for {backend} {version}")
    names: set[str] = set(data.get("wrapper", []))
    for ver in sorted(data["versions"], key=version_key):
        if Version(ver) > Version(version):
            break
        entry = data["versions"][ver] or {}
        names |= set(entry.get("add", []))
        names -= set(entry.get("remove", []))
    return frozenset(names)


def leaf_paths(tree: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of the non-mapping leaves of a nested dict."""
    paths: list[str] = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        paths.extend(leaf_paths(value, path + ".") if isinstance(value, dict) and value else [path])
    return paths


def check_flags(backend: str, version: str, tokens: list[str], engine: dict[str, Any] | None,
                where: str) -> None:
    """Fail closed when a generated flag or engine key is not accepted by that version."""
    ok = allowed(backend, version)
    bad = [t for t in tokens if t.startswith("--") and t not in ok]
    bad += [p for p in leaf_paths(engine or {}) if p not in ok]
    if bad:
        raise GeneratorError(where, f"not accepted by {backend} {version} (generator/allowlists/{backend}.yaml): "
                                    f"{', '.join(bad)}")
