"""Context parallelism on the context pass: the op list of a cp-rank prefill from the layer plan's own ops.

The plan is built twice, at the per-rank share of the pass (ceil(tokens / cp) tokens, ceil(batch / cp) rows) and at
the whole pass; context_parallel.yaml says which ops take the whole pass, how attention splits (zigzag), which
collectives the ranks add and what a cp layout's decode step leaves out. Which architectures price it on which
backend: models.yaml `context_parallel`; the KV all-gathers per attention type: the layer plan's `kv_gathers`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from math import ceil
from pathlib import Path

from perfledger.estimator.errors import UnsupportedModelError
from perfledger.estimator.models.config import MODELS_YAML, ModelConfig
from perfledger.estimator.models.memory import kv_element_bytes
from perfledger.estimator.models.priced import KVGather, PricedModel
from perfledger.estimator.plan.space import context_parallel_alone
from perfledger.safe_io import data_yaml

CONTEXT_PARALLEL_YAML = Path(__file__).with_name("context_parallel.yaml")
ATTENTION = "attention"
KV_GATHER = "cp_all_gather"


@cache
def _rules() -> dict:
    return data_yaml(CONTEXT_PARALLEL_YAML)


def check_context_parallel(m: PricedModel, d, config: ModelConfig) -> None:
    """cp > 1 exists only where the architecture prices it on the backend, without attention TP or DP (0.12.0 refuses
    the rest)."""
    backends = m.family.get("context_parallel") or []
    if not prices_context_parallel(m, d.backend):
        raise UnsupportedModelError(f"{config.name}: context parallelism (cp {d.cp}) is not priced for "
                                    f"{config.architecture} on {d.backend} ({MODELS_YAML.name} context_parallel: "
                                    f"{', '.join(backends) or 'none'})")
    if not context_parallel_alone(d.tp, d.attention_dp, d.cp):
        raise UnsupportedModelError(f"{config.name}: context parallelism (cp {d.cp}) needs tp 1 and attention-dp 1 "
                                    f"(got tp {d.tp}, attention-dp {d.attention_dp})")


def split_context(build: Callable[[int, int], list], m: PricedModel, d, tokens: int, batch: int,
                  kv_gathers: list[KVGather]) -> list:
    """The context pass of `tokens` new tokens over `batch` requests on d.cp ranks; `build(tokens, batch)` is the
    plan's op list of a one-rank pass (cached prefix applied); `kv_gathers`: the plan's KV all-gathers, added after
    the first attention entry."""
    cp, rule = d.cp, _rules()[d.backend]
    base = {"system": d.system, "backend": d.backend, "version": d.version}

    def collective(op: str, elements: float) -> dict:
        return {**base, "op": op, "quant": rule["quant"], "num_gpus": cp, "elements": elements}

    out, gathered = [], False
    kv_bytes = kv_element_bytes(d.kv_quant) / 2  # as half elements
    shares, whole = build(ceil(tokens / cp), ceil(batch / cp)), build(tokens, batch)
    for share, (name, op, query, scale) in zip(shares, whole, strict=True):
        dispatch = next((collective_op for suffix, collective_op in rule["dispatch"].items() if name.endswith(suffix)),
                        None)
        if name == ATTENTION:
            out += zigzag(op, query, scale, cp)
            if not gathered:
                gathered = True
                out += [(KV_GATHER + g.suffix, "comm", collective(rule["kv_gather"], tokens * g.elements * kv_bytes),
                         g.layers) for g in kv_gathers if g.layers]
        elif op in rule["whole_tokens"]:
            out.append((name, op, query, scale))
        elif dispatch is not None:
            out.append((name, "comm", collective(dispatch, tokens * m.dims.hidden), scale))
        else:
            out.append(share)
    return out


def split_decode(ops: list, m: PricedModel, d) -> list:
    """A cp layout's decode pass: the plan's tp1 pass without the ops context_parallel.yaml `decode_without` names
    for the plan kind (by name suffix)."""
    dropped = tuple(_rules()[d.backend].get("decode_without", {}).get(m.family["kind"], ()))
    return [op for op in ops if not op[0].endswith(dropped)] if dropped else ops


def zigzag(op: str, query: dict, scale: float, cp: int) -> list:
    """Rank 0's attention under the zigzag split: its first chunk of c query tokens over the cached prefix, and the
    mirrored last chunk over the prompt's first isl - c tokens, the second call without the side ops (a banded
    layer's window kept)."""
    isl, prefix = int(query["isl"]), int(query.get("prefix") or 0)
    chunk = ceil((isl - prefix) / (2 * cp))
    return [(ATTENTION, op, {**query, "isl": chunk + prefix, "prefix": prefix}, scale),
            (ATTENTION, op, {**query, "isl": isl, "prefix": isl - chunk, "side_ops": False}, scale)]


def prices_context_parallel(m: PricedModel, backend: str) -> bool:
    """Whether the planner sweeps cp > 1 for this model on `backend` (models.yaml `context_parallel`)."""
    return backend in (m.family.get("context_parallel") or []) and backend in _rules()
