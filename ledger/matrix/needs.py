"""The ops a model needs priced for one support-matrix row, derived from its HF config and needs.yaml.

A row is PASS only when every op of the model's layers is priced; deriving the list from the model's
own config (GEMMs of its linear layers, GQA or MLA attention in context and generation, MoE, the comm
of the mode's parallel layout) keeps a row from passing because a need was never asked. A need may list
alternatives (`any_of`, resolved in ledger/matrix/choices.py) where backends measure one layer op differently.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from perfledger.estimator.models.config import config_dims
from perfledger.estimator.models.config_expr import ConfigExprError, evaluate

NEEDS_FILE = Path(__file__).with_name("needs.yaml")
PHASES = ("context", "generation")


class NeedsError(ConfigExprError):
    """A needs.yaml entry or a model config that cannot be turned into op queries (names file and key)."""


@dataclass(frozen=True)
class Need:
    """One op query a row needs: `name` (layer op), estimator `op`, perf `table`, phase and query values."""

    name: str
    op: str
    table: str
    phase: str
    query: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Option:
    """One way to price a need with alternatives: every op in `needs` must be priced; `backends` limits it (empty: any)."""

    needs: tuple[Need, ...]
    backends: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return " + ".join(dict.fromkeys(n.name for n in self.needs))


@dataclass(frozen=True)
class Choice:
    """A need with alternatives (`any_of`): the layer op (`name`, `phase`) with options tried in order
    (resolved by ledger/matrix/choices.py)."""

    name: str
    phase: str
    options: tuple[Option, ...]


@cache
def load_needs(path: Path = NEEDS_FILE) -> dict:
    return yaml.safe_load(Path(path).read_text())


def model_dims(config: dict, source: str, fields: dict[str, list]) -> dict[str, Any]:
    """needs.yaml `dims` resolved against an HF config."""
    return config_dims(config, source, fields, NEEDS_FILE.name)


def load_config(model: str) -> tuple[dict, str]:
    """The model's HF config.json (the estimator's model-config reader: settings.model_config_dirs())."""
    from perfledger.estimator.errors import EstimatorError
    from perfledger.estimator.models.config import model_config

    try:
        config = model_config(model)
    except EstimatorError as exc:
        raise NeedsError(str(exc)) from None
    return config.config, config.path.name


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


def _plan_kernels(spec: Any, at: str) -> list[dict]:
    """`plan_kernels: {architecture, backend, step, template}`: one op template per kernel the architecture's static
    layer plan runs at `step` on `backend` (the estimator's models.yaml `backends`), so the kernels a backend runs
    are stated once and the matrix asks exactly what the static estimate prices."""
    from perfledger.estimator.models.config import MODELS_YAML, catalog

    if not isinstance(spec, dict) or set(spec) != {"architecture", "backend", "step", "template"} \
            or not isinstance(spec["template"], dict):
        raise NeedsError(f"{at}.plan_kernels: expected {{architecture, backend, step, template: op template}}")
    plans = (catalog()["architectures"].get(spec["architecture"]) or {}).get("backends") or {}
    kernels = (plans.get(spec["backend"]) or {}).get(spec["step"])
    if not kernels:
        raise NeedsError(f"{at}.plan_kernels: {MODELS_YAML.name} {spec['architecture']} has no "
                         f"backends.{spec['backend']}.{spec['step']}")
    t = spec["template"]
    return [{**t, "name": k, "fixed": {"kernel": k, **(t.get("fixed") or {})}}
            for k in (kernels.values() if isinstance(kernels, dict) else [kernels])]


def _choice(t: dict, names: dict, labels: dict, phase: str, where: str) -> Choice:
    """An `any_of` need: options in order, each {ops: [op templates] or plan_kernels, backends: [..] (optional)}."""
    if "op" in t or not isinstance(t["any_of"], list) or not t["any_of"]:
        raise NeedsError(f"{where}.any_of: expected a non-empty list of options (and no `op` beside it)")
    if not isinstance(t.get("name"), str):
        raise NeedsError(f"{where}.name: an any_of need needs a name (the layer op its options price)")
    options = []
    for j, raw in enumerate(t["any_of"]):
        at = f"{where}.any_of[{j}]"
        if isinstance(raw, dict) and set(raw) <= {"plan_kernels", "backends"} and "plan_kernels" in raw:
            raw = {"ops": _plan_kernels(raw["plan_kernels"], at), **({"backends": raw["backends"]} if "backends" in raw else {})}
        if not isinstance(raw, dict) or set(raw) - {"ops", "backends"} or not isinstance(raw.get("ops"), list) \
                or not raw["ops"]:
            raise NeedsError(f"{at}: expected {{ops: [op templates], backends: [names] (optional)}} "
                             "(or plan_kernels in place of ops)")
        backends = raw.get("backends") or []
        if not isinstance(backends, list) or not all(isinstance(b, str) for b in backends):
            raise NeedsError(f"{at}.backends: expected a list of backend names")
        ops = [_need(op, names, labels, phase, f"{at}.ops[{k}]") for k, op in enumerate(raw["ops"])
               if not (isinstance(op, dict) and "when" in op and not evaluate(op["when"], names, f"{at}.ops[{k}].when"))]
        options.append(Option(tuple(ops), tuple(backends)))
    return Choice(t["name"], phase, tuple(options))


def derive_needs(architecture: str, dims: dict, quant: dict, mode: str, doc: dict | None = None) -> list[Need | Choice]:
    """Every op query (Need) or alternative set (Choice) of one layer stack for `mode` (agg/disagg),
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
