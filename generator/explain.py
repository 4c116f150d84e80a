"""`perfledger generate --explain KEY`: a key's schema entry and its flag on every backend and version."""

from __future__ import annotations

from typing import Any

from perfledger.generator.errors import GeneratorError
from perfledger.generator.mapping import BACKENDS, load_mapping
from perfledger.generator.multinode import multinode_form
from perfledger.generator.schema import ROLES, did_you_mean, load_schema

# Keys whose effect is the per-node launch of a worker spanning nodes: explain shows those flags.
_MULTINODE_KEYS = {"NodeConfig.node_ips", "NodeConfig.master_port", "NodeConfig.num_gpus_per_node"}


def _merge(spans: list[dict[str, Any]], span: dict[str, Any], version: str) -> None:
    """Append `version` to the last span when it says the same, else start a new span."""
    if spans and {k: v for k, v in spans[-1].items() if k != "versions"} == span:
        spans[-1]["versions"].append(version)
    else:
        spans.append({**span, "versions": [version]})


def _multinode_flags(backend: str, versions: list[str]) -> list[dict[str, Any]]:
    """Per version: the leader's and a follower's rendezvous flags, or why there are none."""
    form, spans = multinode_form(backend), []
    for version in versions:
        reason = form.unavailable(version)
        if reason:
            span: dict[str, Any] = {"flag": None, "reason": reason}
        else:
            ranks = [" ".join(form.flags_for(version, 2, rank, "<addr>", "<port>", "explain")) for rank in (0, 1)]
            span = {"flag": f"rank 0: {ranks[0]} | rank 1: {ranks[1]}"}
            if form.requires is not None:
                span["when"] = form.requires.source
        _merge(spans, span, version)
    return spans


def _all_keys() -> list[str]:
    schema = load_schema()
    keys = [*schema.top, *(f"{s}.{k}" for s, fields in schema.sections.items() for k in fields)]
    return keys + [f"Workers.<role>.{k}" for k in schema.roles]


def explain(key: str) -> dict[str, Any]:
    """{'key', 'schema', 'flags': {backend: [{'versions': [...], 'flag': name | None}]}}.

    Worker keys may be given bare (`max_batch_size`) or as `Workers.<role>.key`.
    """
    schema, mapping = load_schema(), load_mapping()
    parts = key.split(".")
    if len(parts) == 3 and parts[0] == "Workers" and parts[1] in (*ROLES, "<role>"):
        key, parts = parts[2], [parts[2]]
    spec = schema.spec(key) if len(parts) > 1 or key in schema.top else schema.roles.get(key)
    if spec is None:
        raise GeneratorError(key, "unknown key" + did_you_mean(key, _all_keys() + list(schema.roles)))
    result: dict[str, Any] = {"key": key, "schema": spec}
    param = mapping.params.get(key) if len(parts) == 1 else None
    if param is not None:
        result["flags"] = {}
        for backend in BACKENDS:
            spans: list[dict[str, Any]] = []
            for version in mapping.backends[backend]["versions"]:
                found = param.flag_for(backend, version)
                span = {"flag": found[0] if found else None}
                if found and found[1].value is not None:
                    span["value"] = found[1].value.source
                _merge(spans, span, version)
            result["flags"][backend] = spans
    if key in _MULTINODE_KEYS:
        result["flags"] = {b: _multinode_flags(b, mapping.backends[b]["versions"]) for b in BACKENDS}
    return result


_NOTES = (("value", "value: "), ("when", "only when "), ("reason", ""))


def format_explain(info: dict[str, Any]) -> str:
    """Plain-text rendering for the terminal."""
    lines = [f"{info['key']}: {info['schema'].get('help', '')}"]
    lines += [f"  {k}: {v}" for k, v in info["schema"].items() if k != "help"]
    for backend, spans in info.get("flags", {}).items():
        for span in spans:
            versions = span["versions"][0] if len(span["versions"]) == 1 else f"{span['versions'][0]}..{span['versions'][-1]}"
            value = "".join(f"  ({label}{span[k]})" for k, label in _NOTES if k in span)
            lines.append(f"  {backend} {versions}: {span['flag'] or '(not supported)'}{value}")
    return "\n".join(lines)
