"""From a unified document to a resolved Deployment: schema, runtime, defaults, mode, rules (one path)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfledger.generator.defaults import apply_defaults, canonical
from perfledger.generator.mapping import load_mapping
from perfledger.generator.model import Deployment, build_deployment, detect_mode
from perfledger.generator.rule_apply import apply_rules, order_rules
from perfledger.generator.rule_parse import load_rule_set
from perfledger.generator.schema import check_backend_keys, check_document, load_schema
from perfledger.generator.versions import check_image_tag, resolve_runtime


@dataclass(frozen=True)
class Resolution:
    """`resolved_input` is re-loadable (generator_config.yaml); `provenance` maps rule-set values to rules."""

    deployment: Deployment
    resolved_input: dict[str, Any]
    provenance: dict[str, str]
    warnings: tuple[str, ...]


def resolve(doc: Any, where: str) -> Resolution:
    """Validate, resolve the runtime, fill defaults, decide the mode and apply the rule set."""
    schema = load_schema()
    check_document(doc, where)
    top = {key: doc.get(key, spec.get("default")) for key, spec in schema.top.items()}
    check_backend_keys(doc, top["backend"])
    mapping = load_mapping()
    runtime = resolve_runtime(top["backend"], top["version"], top["generator_dynamo_version"], top["target"],
                              mapping.backends[top["backend"]]["versions"])
    warnings = list(runtime.warnings)
    resolved = apply_defaults(doc, {"runtime_image": runtime.image, "backend_version": runtime.version,
                                    "dynamo_version": runtime.dynamo_version})
    resolved["version"] = runtime.version
    resolved["generator_dynamo_version"] = runtime.dynamo_version
    resolved["DynConfig"]["mode"] = detect_mode(resolved["Workers"], resolved["DynConfig"].get("mode"))
    resolved = canonical(resolved)
    if "k8s_image" in doc.get("K8sConfig", {}):
        warnings += check_image_tag(resolved["K8sConfig"]["k8s_image"], runtime, top["target"])
    rules = order_rules(load_rule_set(resolved["rule"], top["backend"], schema, "rule"), schema)
    final, provenance = apply_rules(rules, resolved, schema)
    warnings += overridden_inputs(doc, final, provenance, rules)
    deployment = build_deployment(final, doc, runtime, top["target"])
    return Resolution(deployment, resolved, provenance, tuple(warnings))


def _at(doc: dict[str, Any], path: str) -> Any:
    node: Any = doc
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def overridden_inputs(doc: dict[str, Any], final: dict[str, Any], provenance: dict[str, str], rules) -> list[str]:
    """One warning per value the input set that a rule changed, naming both values and the rule (and the switch
    that keeps the input's, when the rule sits under one), so a changed limit is never silent."""
    by_where = {rule.where: rule for rule in rules}
    out = []
    for path, where in sorted(provenance.items()):
        given, made = _at(doc, path), _at(final, path)
        if given is None or made == given:
            continue
        switches = sorted({n for c in by_where[where].conditions for n in c.names if n in load_schema().top})
        keep = f"; set {' / '.join(f'{n}: true' for n in switches)} to keep {given!r}" if switches else ""
        out.append(f"{path}: the input sets {given!r}, rule {where} makes it {made!r}{keep}")
    return out
