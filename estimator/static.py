"""Static whole-model estimates: a model's layer plan priced through the batch API, summed serially.

TTFT = Σ context ops × scale; TPOT = Σ over decode steps (stride 32, weighted by repeats) / (osl − 1).
The op list of one forward pass comes from the architecture's layer plan (models/plans/registry.py);
quants left unset on the `Deploy` follow the checkpoint (quant/checkpoint.py), else bfloat16.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import polars as pl

from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError, UnsupportedModelError
from perfledger.estimator.fit.roofline import mem_op_latency
from perfledger.estimator.models.config import MODELS_YAML, ModelConfig, catalog, resolve_model
from perfledger.estimator.models.plans.registry import PLANS, load_model
from perfledger.estimator.quant.checkpoint import resolve as resolve_quants


@dataclass(frozen=True)
class Deploy:
    system: str
    backend: str
    version: str
    tp: int = 1
    moe_tp: int = 1
    moe_ep: int = 1
    # None: the checkpoint's quant (its quantization_config / hf_quant_config), else bfloat16
    gemm_quant: str | None = None
    moe_quant: str | None = None
    kv_quant: str | None = None
    fmha_quant: str | None = None


def price(est, ops, spec, mode: str = "silicon") -> dict[str, float]:
    """Latency (ms, × scale) per op name."""
    out = {}
    for name, op, query, scale in ops:
        if op == "mem":
            out[name] = float(mem_op_latency(query["bytes"], spec)) * scale
        elif op == "allreduce" and query["tp"] <= 1:
            out[name] = 0.0
        elif op == "overlap":  # parallel op groups (decode streams): the slower group's sum
            out[name] = max(sum(price(est, group, spec, mode).values()) for group in query["groups"]) * scale
        elif op == "fallback":
            out[name] = fallback(est, query, spec, mode) * scale
        else:
            query_frame = pl.DataFrame({k: [v] for k, v in query.items()})
            out[name] = float(estimate(est, op, query_frame, mode=mode)["latency_ms"][0]) * scale
    return out


def fallback(est, query: dict, spec, mode: str) -> float:
    """The `primary` ops' sum, else on a data miss the `fallback` ops' (0.12.0's FallbackOp: HYBRID asks the primary
    in SILICON, so a module table's miss reads the granular ops' data before any empirical guess; in EMPIRICAL a
    primary without samples falls back too)."""
    try:
        return sum(price(est, query["primary"], spec, "silicon" if mode == "hybrid" else mode).values())
    except (NoDataError, EmpiricalUnavailableError):
        return sum(price(est, query["fallback"], spec, mode).values())


def static(est, model: str | ModelConfig, d: Deploy, *, batch: int, isl: int, osl: int, mode: str = "silicon") -> dict:
    """{"ttft_ms", "tpot_ms", "quants": {q: {quant, source}}, "context": {op: ms}, "generation": {op: ms}};
    `model` is an HF id looked up in the model-config folders, or a ModelConfig read from a given path."""
    config = resolve_model(model)
    m = load_model(config)
    plan, backends = PLANS[m.family["kind"]], m.family.get("backends")
    quants = resolve_quants(config, d.backend, {"gemm": d.gemm_quant, "moe": d.moe_quant,
                                                "kv": d.kv_quant, "fmha": d.fmha_quant})
    d = replace(d, **{f"{q}_quant": v["quant"] for q, v in quants.items()})
    if backends and d.backend not in backends:
        raise UnsupportedModelError(f"{config.name}: the {m.family['kind']} layer plan is assembled for backends "
                                    f"{', '.join(backends)} only ({MODELS_YAML.name} `backends`), not {d.backend}")
    if plan.check is not None:
        plan.check(m, d, config)
    spec = est.spec(d.system)
    context = price(est, plan.ops(m, d, batch * isl, True, batch, isl), spec, mode)
    generation: dict[str, float] = {}
    stride = catalog()["decode_stride"]
    for i in range(0, osl - 1, stride):
        repeat = min(stride, osl - 1 - i)
        for name, ms in price(est, plan.ops(m, d, batch, False, batch, isl + i + 1), spec, mode).items():
            generation[name] = generation.get(name, 0.0) + ms * repeat
    ttft = sum(context.values())
    tpot = sum(generation.values()) / (osl - 1) if osl > 1 else 0.0
    return {"ttft_ms": ttft, "tpot_ms": tpot, "quants": quants, "context": context, "generation": generation}
