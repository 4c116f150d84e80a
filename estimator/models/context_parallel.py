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

from perfledger.estimator.errors import NoDataError, UnsupportedModelError
from perfledger.estimator.models.cached_prefix import CachedPrefix, cached_pass, prefix_rule
from perfledger.estimator.models.config import MODELS_YAML, ModelConfig, catalog
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
                  kv_gathers: list[KVGather], cached: CachedPrefix | None = None) -> list:
    """The context pass of `tokens` new tokens over `batch` requests on d.cp ranks under the pass's cached prefix;
    `build(tokens, batch)` is the plan's op list of a one-rank pass; `kv_gathers`: the plan's KV all-gathers, added
    after the first entry that holds attention (also inside a fallback op: the MLA block's granular ops)."""
    cp, rule = d.cp, _rules()[d.backend]
    base = {"system": d.system, "backend": d.backend, "version": d.version}

    def collective(op: str, elements: float) -> dict:
        return {**base, "op": op, "quant": rule["quant"], "num_gpus": cp, "elements": elements}

    def split(shares: list, whole: list, uncached: list) -> list:
        out = []
        for share, (name, op, query, scale), raw in zip(shares, whole, uncached, strict=True):
            dispatch = next((collective_op for suffix, collective_op in rule["dispatch"].items()
                             if name.endswith(suffix)), None)
            if op == "fallback":
                parts = {part: split(share[2][part], query[part], raw[2][part])
                         for part in ("primary", "fallback")}
                out.append((name, op, {**query, **parts}, scale))
            elif name == ATTENTION:
                out += zigzag(op, query, raw[3], cp, cached, side_ops_once=op in rule["side_ops_once"])
            elif op in rule["whole_tokens"]:
                out.append((name, op, query, scale))
            elif op in rule["whole_tokens_per_rank_layers"]:
                out.append((name, op, query, scale / cp))
            elif op in rule["floor_tokens"]:
                if tokens < cp:
                    raise NoDataError(f"{m.name}: cp {cp} leaves a rank no token of the {tokens} for the {op} op")
                out.append((name, op, {**share[2], rule["floor_tokens"][op]: tokens // cp}, scale))
            elif dispatch is not None:
                out.append((name, "comm", collective(dispatch, tokens * m.dims.hidden), scale))
            else:
                out.append(share)
        return out

    uncached = build(tokens, batch)
    out, gathered = [], False
    kv_bytes = kv_element_bytes(d.kv_quant) / 2  # as half elements
    shares = build(ceil(tokens / cp), ceil(batch / cp))
    for entry in split(cached_pass(shares, cached, where=m.name), cached_pass(uncached, cached, where=m.name), uncached):
        out.append(entry)
        if not gathered and _holds_attention(entry):
            gathered = True
            out += [(KV_GATHER + g.suffix, "comm", collective(rule["kv_gather"], tokens * g.elements * kv_bytes),
                     g.layers) for g in kv_gathers if g.layers]
    return out


def _holds_attention(entry: tuple) -> bool:
    name, op, query, _ = entry
    return name == ATTENTION or (op == "fallback" and any(_holds_attention(e) for e in query["fallback"]))


def split_decode(ops: list, m: PricedModel, d) -> list:
    """A cp layout's decode pass: the plan's tp1 pass without the ops context_parallel.yaml `decode_without` names
    for the plan kind (by name suffix, also inside overlap groups: the MLA line's routed branch)."""
    dropped = tuple(_rules()[d.backend].get("decode_without", {}).get(m.family["kind"], ()))
    if not dropped:
        return ops
    kept = [op for op in ops if not op[0].endswith(dropped)]
    return [(name, op, {**query, "groups": [split_decode(g, m, d) for g in query["groups"]]}, scale)
            if op == "overlap" else (name, op, query, scale) for name, op, query, scale in kept]


def zigzag(op: str, query: dict, scale: float, cp: int, cached: CachedPrefix | None, *, side_ops_once: bool) -> list:
    """Rank 0's attention under the zigzag split of a pass over `query`'s isl tokens, `cached`'s prefix of them cached
    where its rules price the op (else none): its first chunk of c new query tokens over the cached prefix and the
    mirrored last chunk over the prompt's first isl - c tokens, each call under the op's models.yaml `cached_prefix`
    rule at its own length and prefix (the MLA kernel's causal share; a banded layer's window kept); `scale`: the op's
    scale before any prefix rule; `side_ops_once`: the second call pays no side ops of its own (GQA attention)."""
    rule = cached.rules.get(op) if cached else None
    prefix, rule = (cached.prefix, rule) if rule else (0, catalog()["cached_prefix"].get(op))
    if rule is None:
        raise UnsupportedModelError(f"the zigzag split of context parallelism is not priced for the {op} op "
                                    f"({MODELS_YAML.name} `cached_prefix` has no rule for it)")
    isl = int(query["isl"])
    chunk = ceil((isl - prefix) / (2 * cp))
    calls = []
    for call_prefix, length in ((prefix, chunk + prefix), (isl - chunk, isl)):
        call, call_scale = prefix_rule(rule, query, scale, call_prefix, length)
        calls.append((ATTENTION, op, {**call, "side_ops": False} if side_ops_once and calls else call, call_scale))
    return calls


def prices_context_parallel(m: PricedModel, backend: str) -> bool:
    """Whether the planner sweeps cp > 1 for this model on `backend` (models.yaml `context_parallel`)."""
    return backend in (m.family.get("context_parallel") or []) and backend in _rules()
