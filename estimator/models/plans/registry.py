"""Layer-plan registry: models.yaml names each architecture's plan (`kind`); this maps kinds to plan modules.

A plan module provides `dims(model, family)` (dims beyond models.yaml's `dims`), `ops(m, deploy, tokens, context,
batch, seq)` (the op list of one forward pass) and optionally `check(m, deploy, model)` (deployments it refuses).
Adding an architecture is a models.yaml entry naming a registered plan, or one new plan module registered here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path

import yaml

from perfledger.estimator.errors import EstimatorError, UnsupportedModelError
from perfledger.estimator.models.config import ModelConfig, config_dims, resolve_model
from perfledger.estimator.models.config_expr import ConfigExprError
from perfledger.estimator.models.plans import glm5, gqa, kimi_k3
from perfledger.estimator.quant.checkpoint import unquantized_dims

MODELS_YAML = Path(__file__).parents[1] / "models.yaml"


@dataclass(frozen=True)
class LayerPlan:
    dims: Callable[[ModelConfig, dict], dict]
    ops: Callable[..., list[tuple[str, str, dict, float]]]
    check: Callable[[dict, object, ModelConfig], None] | None = None


PLANS = {
    "dense": LayerPlan(gqa.dims, partial(gqa.ops, moe=False), gqa.check),
    "moe": LayerPlan(gqa.dims, partial(gqa.ops, moe=True), gqa.check),
    "kimi_k3": LayerPlan(kimi_k3.dims, kimi_k3.ops),
    "glm5": LayerPlan(glm5.dims, glm5.ops),
}


@cache
def catalog() -> dict:
    """models.yaml: the dims map, the architectures (plan kind + parameters), decode stride, unsupported ones."""
    return yaml.safe_load(MODELS_YAML.read_text())


def family(model: ModelConfig) -> dict:
    """The architecture's models.yaml entry; an unknown or not-yet-priced architecture is a typed error."""
    arch, doc = model.architecture, catalog()
    entry, gap = doc["architectures"].get(arch), (doc.get("unsupported") or {}).get(arch)
    if entry is None and gap is not None:
        hint = f"; {gap['instead']}" if gap.get("instead") else ""
        raise UnsupportedModelError(f"{model.path}: static estimates for {arch} need op families not priced yet: "
                                    f"{'; '.join(gap['needs'])}{hint}")
    if entry is None:
        raise EstimatorError(f"{model.path}: architecture {arch!r} not in {MODELS_YAML.name}")
    if entry["kind"] not in PLANS:
        raise EstimatorError(f"{MODELS_YAML.name} {arch}: no layer plan {entry['kind']!r}; known: {', '.join(PLANS)}")
    return entry


def layer_plan(model: ModelConfig) -> LayerPlan | None:
    """The model's registered layer plan, or None when models.yaml does not price its architecture."""
    entry = catalog()["architectures"].get(model.architecture)
    return PLANS.get(entry["kind"]) if entry else None


def model_dims(model: ModelConfig) -> dict:
    """Dims of one model, shared by its static plan and the memory model: models.yaml `dims`, the checkpoint's
    unquantized parts, then the layer plan's own dims (when models.yaml prices the architecture)."""
    dims = {**config_dims(model.config, str(model.path), catalog()["dims"], MODELS_YAML.name), **unquantized_dims(model)}
    if (plan := layer_plan(model)) is not None:
        dims.update(plan.dims(model, catalog()["architectures"][model.architecture]))
    return dims


def load_model(model: str | ModelConfig) -> dict:
    """The plan's view of a model (an HF id or a read config): its dims merged with its models.yaml entry and name."""
    model = resolve_model(model)
    entry = family(model)
    try:
        dims = model_dims(model)
    except ConfigExprError as exc:
        raise EstimatorError(str(exc)) from None
    return {**dims, **entry, "name": model.name}
