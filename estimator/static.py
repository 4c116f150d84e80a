"""Static whole-model estimates: a model's layer plan priced through the batch API, summed serially.

TTFT = Σ context ops × scale; TPOT = Σ over decode steps (stride 32, weighted by repeats) / (osl − 1).
The op list of one forward pass comes from the architecture's layer plan (models/plans/registry.py);
quants left unset on the `Deploy` follow the checkpoint (quant/checkpoint.py), else bfloat16.
Deployment knobs, as 0.12.0 prices them: pipeline stages keep every layer on the serial path and add pp − 1
stage hand-offs (`p2p`) per pass; a cached prefix shortens prefill to isl − prefix tokens per request (each
sequence-aware op by its models.yaml `cached_prefix` rule; GQA attention by its causal share, ops/attention/context.py);
MTP (`nextn` draft tokens) runs each decode step over batch × (nextn + 1) tokens with every generation op scaled by
(layers + nextn) / layers; context parallelism (`cp`, a backend models.yaml `context_parallel` names) splits the
context pass across cp ranks (models/context_parallel.py); a MoE deployment's expert width moe_tp × moe_ep must equal
tp × attention-dp × cp (plan/space.py `check_moe_width`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import ceil

import polars as pl

from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError, UnsupportedModelError
from perfledger.estimator.fit.roofline import mem_op_latency, mem_op_sol
from perfledger.estimator.models.cached_prefix import CachedPrefix, cached_pass, prompt_prefix
from perfledger.estimator.models.config import MODELS_YAML, ModelConfig, catalog, resolve_model
from perfledger.estimator.models.context_parallel import check_context_parallel, split_context, split_decode
from perfledger.estimator.models.memory import flag_overridden
from perfledger.estimator.models.plans.registry import PLANS, load_model
from perfledger.estimator.models.priced import PricedModel
from perfledger.estimator.models.vision import Images, encoder_ops, image_tokens, vision
from perfledger.estimator.ops.base import SHARED_MODES
from perfledger.estimator.plan.evaluate import p2p_latency
from perfledger.estimator.plan.space import check_moe_width
from perfledger.estimator.quant.checkpoint import resolve as resolve_quants
from perfledger.estimator.quant.context_fmha import resolve_by_data


@dataclass(frozen=True)
class Deploy:
    system: str
    backend: str
    version: str
    tp: int = 1
    moe_tp: int = 1
    moe_ep: int = 1
    pp: int = 1
    attention_dp: int = 1  # attention data-parallel ranks, each with its own batch
    cp: int = 1  # context-parallel ranks, each prefilling a share of every prompt (decode runs without it)
    nextn: int = 0  # MTP draft tokens per decode step
    # None: the checkpoint's quant (its quantization_config / hf_quant_config), else bfloat16
    gemm_quant: str | None = None
    moe_quant: str | None = None
    kv_quant: str | None = None
    fmha_quant: str | None = None
    moe_backend: str | None = None  # None: the backend's default MoE; a models.yaml `moe_backends` key (megamoe)
    # ((phase, comm backend), ...): the MoE all-to-all the planner prices the layout through (plan/large_ep.py)
    moe_a2a: tuple[tuple[str, str], ...] = ()
    a2a_nodes: int = 1  # the nodes that all-to-all spans
    sm_version: int | None = None  # the system's GPU generation (filled from its spec where quants are resolved)


def price(est, ops, spec, mode: str = "silicon", energy: dict[str, float] | None = None) -> dict[str, float]:
    """Latency (ms, × scale) per op name; ops sharing a name add up (a plan's parts of one op, e.g. banded and
    global attention layers, reported as one entry as 0.12.0 does). `energy`, when given, receives the W·ms
    (× scale) of the ops priced from measured power, by name (memory ops, p2p and ops without power: none)."""
    out: dict[str, float] = {}
    for name, op, query, scale in ops:
        wms = None
        if op == "mem":
            ms = float((mem_op_sol if mode == "sol" else mem_op_latency)(query["bytes"], spec)) * scale
        elif op == "p2p":
            ms = p2p_latency(query["bytes"], spec) * scale
        elif op == "allreduce" and query["tp"] <= 1:
            ms = 0.0
        elif op in ("overlap", "fallback"):
            ms, wms = (overlap if op == "overlap" else fallback)(est, query, spec, mode)
            ms, wms = ms * scale, None if wms is None else wms * scale
        else:
            row = estimate(est, op, pl.DataFrame({k: [v] for k, v in query.items()}), mode=mode).row(0, named=True)
            ms, wms = float(row["latency_ms"]) * scale, None if row["energy_wms"] is None else row["energy_wms"] * scale
        out[name] = out.get(name, 0.0) + ms
        if energy is not None and wms is not None:
            energy[name] = energy.get(name, 0.0) + wms
    return out


def _priced_sum(est, ops, spec, mode: str) -> tuple[float, float | None]:
    """(Σ latency, Σ energy or None when no op carries energy) of one op group."""
    energy: dict[str, float] = {}
    ms = sum(price(est, ops, spec, mode, energy).values())
    return ms, sum(energy.values()) if energy else None


def overlap(est, query: dict, spec, mode: str) -> tuple[float, float | None]:
    """Parallel op groups (decode streams): the slower group's sum; the energy of every group, since each stream's
    kernels draw their power while they overlap (0.12.0's OverlapOp; probed on DeepSeek-V3 and Qwen3.5-MoE decode,
    h200 vLLM 0.22.0)."""
    priced = [_priced_sum(est, group, spec, mode) for group in query["groups"]]
    energies = [wms for _, wms in priced if wms is not None]
    return max(ms for ms, _ in priced), sum(energies) if energies else None


def fallback(est, query: dict, spec, mode: str) -> tuple[float, float | None]:
    """The `primary` ops' sum, else on a data miss the `fallback` ops' (0.12.0's FallbackOp: HYBRID asks the primary
    in SILICON, so a module table's miss reads the granular ops' data before any empirical guess; in EMPIRICAL a
    primary without samples falls back too); with the energy of the group priced."""
    try:
        return _priced_sum(est, query["primary"], spec, "silicon" if mode == "hybrid" else mode)
    except (NoDataError, EmpiricalUnavailableError):
        return _priced_sum(est, query["fallback"], spec, mode)


def static(est, model: str | ModelConfig, d: Deploy, *, batch: int, isl: int, osl: int, mode: str = "silicon",
           prefix: int = 0, images: Images | None = None) -> dict:
    """{"ttft_ms", "tpot_ms", "quants": {q: {quant, source}}, "encoder": {op: ms}, "context": {op: ms},
    "generation": {op: ms}}; `model` is an HF id looked up in the model-config folders, or a ModelConfig read from a
    given path; `prefix`: cached tokens of each request's isl (prefill computes isl - prefix tokens per request);
    `images`: each request's images (models/vision.py): a VL model prices its vision encoder first (part of TTFT) and
    its language model over isl + the images' tokens ("encoder" empty without images)."""
    config = resolve_model(model)
    m = load_model(config)
    vit = vision(config, m.family)
    backends = m.family.get("backends")
    quants = resolve_quants(config, d.backend, {"gemm": d.gemm_quant, "moe": d.moe_quant,
                                                "kv": d.kv_quant, "fmha": d.fmha_quant})
    quants = resolve_by_data(quants, config.architecture, est, d.system, d.backend, d.version,
                             shared=mode in SHARED_MODES)
    m = under_flags(m, config.architecture, quants)
    d = replace(d, sm_version=est.spec(d.system).sm_version, **{f"{q}_quant": v["quant"] for q, v in quants.items()})
    if backends and d.backend not in backends:
        raise UnsupportedModelError(f"{config.name}: the {m.family['kind']} layer plan is assembled for backends "
                                    f"{', '.join(backends)} only ({MODELS_YAML.name} `backends`), not {d.backend}")
    check_deploy(m, d, config)
    spec = est.spec(d.system)
    if not 0 <= prefix < isl:
        raise UnsupportedModelError(f"{config.name}: prefix {prefix} must be in [0, isl {isl})")
    encoder_wms: dict[str, float] = {}
    added = image_tokens(vit, images)
    encoder = price(est, encoder_ops(vit, d, batch, images), spec, mode, encoder_wms) if added else {}
    isl += added
    context_wms: dict[str, float] = {}
    context = price(est, pass_ops(m, d, batch * (isl - prefix), True, batch, isl, prefix=prefix), spec, mode, context_wms)
    generation: dict[str, float] = {}
    generation_wms: dict[str, float] = {}
    starts = range(0, osl - 1, catalog()["decode_stride"])
    for i, ops in zip(starts, decode_passes(m, d, batch, [isl + i + 1 for i in starts]), strict=True):
        repeat = min(starts.step, osl - 1 - i)
        step_wms: dict[str, float] = {}
        for name, ms in price(est, ops, spec, mode, step_wms).items():
            generation[name] = generation.get(name, 0.0) + ms * repeat
        for name, wms in step_wms.items():
            generation_wms[name] = generation_wms.get(name, 0.0) + wms * repeat
    ttft = sum(encoder.values()) + sum(context.values())
    tpot = sum(generation.values()) / (osl - 1) if osl > 1 else 0.0
    phases = {"encoder": (encoder, encoder_wms)} if encoder else {}
    phases.update(context=(context, context_wms), generation=(generation, generation_wms))
    return {"ttft_ms": ttft, "tpot_ms": tpot, "quants": quants, "encoder": encoder, "context": context,
            "generation": generation, "energy": energy_totals(phases)}


def energy_totals(phases: dict[str, tuple[dict, dict]]) -> dict | None:
    """0.12.0's static energy report over `phases` (name -> (per-op ms, per-op W·ms); decode summed over every step,
    as its latency): each phase's energy and average power (energy / that phase's latency, ops without power counting
    as 0 W), the end-to-end energy and average (`power_avg_w`), the latency share of ops priced from measured power
    (`power_coverage`) and `power_w`, that average where the share reaches models.yaml's `power_coverage_threshold`
    (else null, as 0.12.0's estimate gates it); None when no op carries energy."""
    if not any(wms for _, wms in phases.values()):
        return None

    def phase(latency: dict, wms: dict) -> dict:
        total, ms = sum(wms.values()), sum(latency.values())
        return {"ops_wms": wms, "energy_wms": total, "power_w": total / ms if ms > 0 else 0.0}

    total_ms = sum(sum(latency.values()) for latency, _ in phases.values())
    total = sum(sum(wms.values()) for _, wms in phases.values())
    covered = sum(latency[n] for latency, wms in phases.values() for n in wms)
    coverage = min(max(covered / total_ms, 0.0), 1.0) if total_ms > 0 else 0.0
    average = total / total_ms if total_ms > 0 else 0.0
    return {**{name: phase(*pair) for name, pair in phases.items()},
            "energy_wms": total, "power_avg_w": average, "power_coverage": coverage,
            "power_w": average if coverage >= catalog()["power_coverage_threshold"] else None}


def check_deploy(m: PricedModel, d: Deploy, config: ModelConfig) -> None:
    """Deployments that do not exist are refused, not priced: sizes below 1, a MoE width unequal to the attention
    width or EP wider than the experts, attention data parallelism on a dense model, and the plan's own refusals."""
    if min(d.tp, d.pp, d.attention_dp, d.moe_tp, d.moe_ep, d.cp) < 1 or d.nextn < 0:
        raise UnsupportedModelError(f"{config.name}: tp, pp, attention-dp, moe_tp, moe_ep, cp must be >= 1, nextn >= 0")
    if d.cp > 1:
        check_context_parallel(m, d, config)
    if m.dims.experts:
        check_moe_width(d.tp, d.attention_dp, d.moe_tp, d.moe_ep, cp=d.cp, where=config.name)
        if d.moe_ep > m.dims.experts:
            raise UnsupportedModelError(f"{config.name}: moe_ep {d.moe_ep} exceeds the {m.dims.experts} experts")
    elif d.attention_dp > 1:
        raise UnsupportedModelError(f"{config.name}: attention data parallelism needs a MoE model (dense: scale replicas)")
    check_moe_backend(m, d, config)
    plan = PLANS[m.family["kind"]]
    if plan.check is not None:
        plan.check(m, d, config)


def check_moe_backend(m: PricedModel, d: Deploy, config: ModelConfig) -> None:
    """A `moe_backend` must be one the architecture's models.yaml `moe_backends` names, on a backend and MoE width
    it allows (0.12.0: MegaMoE on SGLang DeepSeek-V4 with moe_tp 1 and moe_ep > 1)."""
    if d.moe_backend is None:
        return
    backends = m.family.get("moe_backends") or {}
    rule = backends.get(d.moe_backend)
    if rule is None:
        raise UnsupportedModelError(f"{config.name}: moe backend {d.moe_backend!r} is not priced for {config.architecture} "
                                    f"({MODELS_YAML.name} moe_backends: {', '.join(backends) or 'none'})")
    if d.backend not in rule["backends"] or d.moe_tp != rule["moe_tp"] or d.moe_ep < rule["min_moe_ep"]:
        raise UnsupportedModelError(f"{config.name}: moe backend {d.moe_backend} needs backend {'/'.join(rule['backends'])}, "
                                    f"moe_tp {rule['moe_tp']}, moe_ep >= {rule['min_moe_ep']} (got {d.backend}, "
                                    f"moe_tp {d.moe_tp}, moe_ep {d.moe_ep})")


def under_flags(m: PricedModel, architecture: str | None, quants: dict[str, dict[str, str]]) -> PricedModel:
    """`m` as priced under its resolved quants: a flagged GEMM quant also quantizes the checkpoint exclusions it
    overrides (memory.yaml `checkpoint_bf16_if`), in latency as in memory, as 0.12.0 builds the model."""
    if quants["gemm"]["source"] != "flag" or not (names := flag_overridden(architecture or "")):
        return m
    return replace(m, unquantized=m.unquantized.without(names))


def pass_ops(m: PricedModel, d: Deploy, tokens: int, context: bool, batch: int, seq: int, *, prefix: int = 0,
             cached: CachedPrefix | None = None) -> list:
    """The op list of one forward pass with the deployment knobs applied: MTP on decode passes (batch × (nextn + 1)
    tokens, every op × (layers + nextn) / layers), the pp − 1 pipeline hand-offs of the pass's activations, and a
    cached prefix on the context pass: `prefix` of each request's seq under every models.yaml rule, or `cached`
    (a mixed step's, models/cached_prefix.py)."""
    plan = PLANS[m.family["kind"]]
    mtp = 1.0
    if not context and d.nextn > 0:
        tokens, batch, mtp = tokens * (d.nextn + 1), batch * (d.nextn + 1), (m.dims.layers + d.nextn) / m.dims.layers
    cached = (cached or prompt_prefix(prefix, seq)) if context else None
    if context and d.cp > 1:
        ops = split_context(lambda t, b: plan.ops(m, replace(d, cp=1), t, True, b, seq), m, d, tokens, batch,
                            plan.kv_gathers(m), cached)
    else:
        ops = cached_pass(plan.ops(m, d, tokens, context, batch, seq), cached, where=m.name)
        if d.cp > 1:
            ops = split_decode(ops, m, d)
    if d.pp > 1:
        rank_tokens = ceil(tokens / d.cp) if context else tokens
        ops.append(("p2p", "p2p", {"bytes": rank_tokens * m.dims.hidden * 2}, d.pp - 1))
    return ops if mtp == 1.0 else [(name, op, query, scale * mtp) for name, op, query, scale in ops]


class _StepSeq:
    """The kv length of a decode pass before it is known: a placeholder any arithmetic on raises TypeError."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<decode seq>"


STEP_SEQ = _StepSeq()


def decode_passes(m: PricedModel, d: Deploy, batch: int, seqs: list[int]) -> list[list]:
    """`pass_ops(m, d, batch, False, batch, seq)` for each kv length in `seqs`, the op list built once.

    Why: a search prices thousands of decode steps that differ only in their kv length, and a decode pass's `seq`
    reaches its ops only as a query value (layer plans pass it through: `"seq": seq`). So the pass is built at a
    placeholder and each step is a copy with it replaced; every op that does not hold it is the same object in
    every step, which price_many answers once. A plan that computes with a decode pass's seq is refused here
    (tests/estimator/test_decode_passes.py holds every registered plan to the rule)."""
    try:
        template = pass_ops(m, d, batch, False, batch, STEP_SEQ)
    except TypeError as exc:
        raise TypeError(f"{m.name}: the {m.family['kind']} layer plan computes with a decode pass's seq ({exc}); "
                        "decode_passes needs it passed through as a query value") from None
    bind = _binder(template)
    return [bind(seq) for seq in seqs] if bind else [template] * len(seqs)


def _binder(ops: list):
    """A function seq -> `ops` with STEP_SEQ replaced by seq (in query values, also inside fallback and overlap
    groups), sharing every op that does not hold it; None when no op holds it."""
    slots = []  # (op index, query fields holding STEP_SEQ, binders of nested op lists by query field)
    for i, (_, op, query, _) in enumerate(ops):
        fields = tuple(k for k, v in query.items() if v is STEP_SEQ)
        if op == "fallback":
            nested = {part: _binder(query[part]) for part in ("primary", "fallback")}
        elif op == "overlap":
            nested = {"groups": [_binder(g) for g in query["groups"]]}
        else:
            nested = {}
        nested = {k: b for k, b in nested.items() if (any(b) if isinstance(b, list) else b)}
        if fields or nested:
            slots.append((i, fields, nested))
    if not slots:
        return None

    def bind(seq: int) -> list:
        out = list(ops)
        for i, fields, nested in slots:
            name, op, query, scale = ops[i]
            query = {**query, **dict.fromkeys(fields, seq)}
            for key, b in nested.items():
                query[key] = ([g_bind(seq) if g_bind else g for g, g_bind in zip(query[key], b, strict=True)]
                              if isinstance(b, list) else b(seq))
            out[i] = (name, op, query, scale)
        return out

    return bind
