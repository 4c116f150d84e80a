"""Layer-plan registry: models.yaml names each architecture's plan (`kind`); this maps kinds to plan modules.

A plan module provides `ops(m, deploy, tokens, context, batch, seq)` (the op list of one forward pass over a
`PricedModel`) and optionally `dims(model, family)` (its own dims dataclass, for shapes beyond models.yaml's
`dims`), `check(m, deploy, model)` (deployments it refuses) and `kv_gathers(m)` (its KV geometries, for the KV
all-gathers of context parallelism; default one over every layer).
Adding an architecture is a models.yaml entry naming a registered plan, or one new plan module registered here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from perfledger.estimator.errors import EstimatorError, UnsupportedModelError
from perfledger.estimator.models.config import MODELS_YAML, ModelConfig, catalog, model_dims, resolve_model
from perfledger.estimator.models.config_expr import ConfigExprError
from perfledger.estimator.models.plans import (
    deepseek,
    deepseek_v4,
    gemma4,
    glm5,
    gqa,
    hybrid_moe,
    kimi_k3,
    minimax_m3,
    nas,
    nemotron_h,
    qwen35,
)
from perfledger.estimator.models.priced import KVGather, PricedModel, uniform_kv_gather
from perfledger.estimator.quant.checkpoint import unquantized_parts


@dataclass(frozen=True)
class LayerPlan:
    ops: Callable[..., list[tuple[str, str, dict, float]]]
    dims: Callable[[ModelConfig, dict], Any] | None = None
    check: Callable[[PricedModel, object, ModelConfig], None] | None = None
    kv_gathers: Callable[[PricedModel], list[KVGather]] = uniform_kv_gather


PLANS = {
    "deepseek": LayerPlan(deepseek.ops, check=gqa.check, kv_gathers=deepseek.kv_gathers),
    "dense": LayerPlan(partial(gqa.ops, moe=False), check=gqa.check),
    "moe": LayerPlan(partial(gqa.ops, moe=True), check=gqa.check),
    "kimi_k3": LayerPlan(kimi_k3.ops, dims=kimi_k3.dims, check=gqa.check),
    "glm5": LayerPlan(glm5.ops, dims=glm5.dims, check=gqa.check),
    "hybrid_moe": LayerPlan(hybrid_moe.ops, dims=hybrid_moe.dims, check=gqa.check, kv_gathers=hybrid_moe.kv_gathers),
    "nas": LayerPlan(nas.ops, dims=nas.dims),
    "gemma4": LayerPlan(gemma4.ops, dims=gemma4.dims, check=gemma4.check, kv_gathers=gemma4.kv_gathers),
    "qwen35": LayerPlan(qwen35.ops, dims=qwen35.dims, check=qwen35.check),
    "nemotron_h": LayerPlan(nemotron_h.ops, dims=nemotron_h.dims, check=gqa.check),
    "deepseek_v4": LayerPlan(deepseek_v4.ops, dims=deepseek_v4.dims),
    "minimax_m3": LayerPlan(minimax_m3.ops),
}


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


def priced_model(model: ModelConfig) -> PricedModel:
    """The model as its static plan and the memory model read it: models.yaml dims, its family entry, the
    checkpoint's unquantized parts and the plan's own dims (no family or plan dims where models.yaml prices none)."""
    entry = catalog()["architectures"].get(model.architecture) or {}
    plan = PLANS.get(entry.get("kind"))
    plan_dims = plan.dims(model, entry) if plan is not None and plan.dims is not None else None
    return PricedModel(model.name, model_dims(model), entry, unquantized_parts(model), plan_dims)


def load_model(model: str | ModelConfig) -> PricedModel:
    """The plan's view of a model (an HF id or a read config); an architecture no plan prices is a typed error."""
    model = resolve_model(model)
    family(model)
    try:
        return priced_model(model)
    except ConfigExprError as exc:
        raise EstimatorError(str(exc)) from None
