"""Safe YAML in and out: no Python tags, errors name the file and line, dumps keep key order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from perfledger.generator.errors import GeneratorError
from perfledger.safe_io import InputFileError, load_yaml


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys instead of keeping the last one silently."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (line {mark.line + 1})", mark)
        seen[key] = loader.construct_object(value_node, deep=deep)
    return seen


class _UniqueKeyPackageLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """The same for the package's own files, parsed by libyaml where PyYAML has it (~5x less CPU: the generator's
    schema, mapping and rule files were a tenth of a cold `perfledger plan --out`); user files keep the pure-Python
    parser and its error wording."""


for _loader in (_UniqueKeyLoader, _UniqueKeyPackageLoader):
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str, where: str) -> Any:
    """Parse YAML text with the safe loader; `where` names the source in errors."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        loc = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark else where
        problem = getattr(exc, "problem", None) or str(exc)
        raise GeneratorError(loc, f"invalid YAML: {problem}") from None


def load_yaml_file(path: Path, loader_class: type[yaml.BaseLoader] = _UniqueKeyLoader) -> Any:
    """Read and safely parse one YAML file within perfledger.safe_io's caps (a regular UTF-8 file, bounded
    size, nesting and alias expansion); any failure is a GeneratorError naming the file and line."""
    try:
        return load_yaml(Path(path), loader_class=loader_class)
    except InputFileError as exc:
        raise GeneratorError(exc.where, exc.reason) from None


def load_package_yaml(name: str) -> Any:
    """Load a YAML data file shipped inside the generator package."""
    return load_yaml_file(Path(__file__).with_name(name) if "/" not in name else Path(__file__).parent / name,
                          _UniqueKeyPackageLoader)


class _Dumper(yaml.SafeDumper):
    """SafeDumper that indents lists under their key (as most hand-written manifests do) and never emits aliases."""

    def increase_indent(self, flow: bool = False, indentless: bool = False):
        return super().increase_indent(flow, False)

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    """Multi-line strings (scripts, engine files in ConfigMaps) as literal blocks when YAML allows it."""
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _str_representer)


def dump_yaml(data: Any) -> str:
    """One YAML document, keys in insertion order."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096)


def dump_yaml_all(docs: list[Any]) -> str:
    """A multi-document YAML stream (ConfigMap then DGD, for example)."""
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096)
