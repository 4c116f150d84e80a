"""What a layer plan and the memory model read of one model, typed: one object for both, so they size the same model."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any, NamedTuple

from perfledger.estimator.models.config import ModelDims
from perfledger.estimator.quant.checkpoint import Unquantized


@dataclass(frozen=True)
class PricedModel:
    """A model as the estimator prices it (built by models/plans/registry.py)."""

    name: str  # HF id, or the --model-config path
    dims: ModelDims
    family: dict  # models.yaml `architectures` entry: the plan `kind` and its parameters ({} where no plan prices it)
    unquantized: Unquantized  # the checkpoint's bf16 parts
    plan_dims: Any = None  # the layer plan's own dims dataclass (its `dims()`), None where it declares none

    def as_mapping(self) -> dict[str, Any]:
        """Flat names for memory.yaml's expressions only (that language reads names, not attributes): every dim,
        the plan's own dims and the checkpoint's `<group>_bf16` flags (a fresh dict per call)."""
        return dict(self._mapping)

    @cached_property
    def _mapping(self) -> dict[str, Any]:  # built once: a search sizes one model at hundreds of points
        plan = asdict(self.plan_dims) if self.plan_dims is not None else {}
        return {**asdict(self.dims), **plan, **self.unquantized.flags()}


class KVGather(NamedTuple):
    """One KV all-gather of a cp context pass: its name suffix, the K and V elements one token holds per layer (one
    attention rank, unquantized count) and the layers it covers."""

    suffix: str
    elements: int
    layers: float


def uniform_kv_gather(m: PricedModel) -> list[KVGather]:
    """One gather over every layer of a model whose layers share one KV geometry (banded ones too, as gpt-oss's)."""
    return [KVGather("", m.dims.kv_heads * m.dims.head_dim * 2, m.dims.layers)]
