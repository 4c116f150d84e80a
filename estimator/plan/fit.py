"""Memory fit of one worker configuration at one operating point (models/memory.py's model, read once per question)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from perfledger.estimator.data.system_specs import load_spec
from perfledger.estimator.models.config import ModelConfig, resolve_model
from perfledger.estimator.models.memory import Memory, footprint, quant_labels, sized_model, weight_bytes
from perfledger.estimator.models.priced import PricedModel
from perfledger.estimator.plan.space import Parallel
from perfledger.safe_io import data_yaml


@dataclass(frozen=True)
class MemoryModel:
    """What `footprint` reads that does not change across a search: the sized model, the system YAML, backend, quants."""

    arch: str
    model: PricedModel
    system_doc: dict
    backend: str
    version: str
    quants: dict[str, str]
    source: str
    flagged: frozenset = frozenset()  # roles whose quant a flag set (memory.yaml `checkpoint_bf16_if`)
    _terms: dict = field(default_factory=dict, repr=False, compare=False)  # weight terms per (tp, moe_tp, moe_ep)
    layer: str | None = None  # a large-EP layer form sized by its own weight list (memory.yaml `large_ep_weights`)
    _variants: dict = field(default_factory=dict, repr=False, compare=False)  # `under` models per override

    def under(self, quants: dict[str, str], layer: str | None = None) -> MemoryModel:
        """This model at other role quants and layer form (a layout the planner prices through a large-EP layer at its
        own FMHA / KV quants, plan/large_ep.py), built once each."""
        if layer == self.layer and all(self.quants.get(role) == quant for role, quant in quants.items()):
            return self
        key = (layer, *sorted(quants.items()))
        if key not in self._variants:
            self._variants[key] = replace(self, quants={**self.quants, **quants}, layer=layer, _terms={}, _variants={})
        return self._variants[key]

    def worker(self, p: Parallel, *, batch: int, seq_tokens: int, tokens: int, nextn: int = 0,
               decode_tokens: int | None = None, static_path: bool = False, a2a: bool = False) -> Memory:
        """Per-GPU memory of one worker holding `batch` sequences of `seq_tokens` KV slots, `tokens` per forward pass;
        `a2a`: the layout is priced through the MoE all-to-all (its shared expert unsplit, memory.yaml `shared_tp`)."""
        width = (p.tp, p.moe_tp, p.moe_ep, a2a)
        if width not in self._terms:
            names = {**self.model.as_mapping(), "tp": p.tp, "moe_tp": p.moe_tp, "moe_ep": p.moe_ep,
                     "shared_tp": 1 if a2a else p.tp}
            self._terms[width] = weight_bytes(self.arch, names, self.quants, self.backend, self.flagged, self.layer)
        return footprint(self.arch, self.model, self.system_doc, self.backend, tp=p.tp, moe_tp=p.moe_tp, moe_ep=p.moe_ep,
                         quants=self.quants, batch=batch, seq_tokens=seq_tokens, tokens=tokens, version=self.version,
                         source=self.source, pp=p.pp, dp=p.dp, nextn=nextn, decode_tokens=decode_tokens,
                         terms=self._terms[width], static_path=static_path, flagged=self.flagged)


def memory_model(model: str | ModelConfig, system: str, backend: str, version: str, quants: dict) -> MemoryModel:
    """IO edge: read the model config and the system YAML once. quants: labels by role, or static()'s
    {role: {"quant", "source"}}; a MemoryModelError names what cannot be sized."""
    arch, sized = sized_model(resolve_model(model))
    path = Path(load_spec(system).source)
    labels, flagged = quant_labels(quants)
    return MemoryModel(arch, sized, data_yaml(path), backend, version, labels, str(path), flagged)
