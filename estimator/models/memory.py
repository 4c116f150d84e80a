"""Per-GPU memory of one deployment: weights, KV cache, activations and runtime overheads vs capacity.

Why: a deployment whose weights alone exceed a GPU cannot serve, whatever the op latencies say. 0.12.0's
sweep drops such configurations (`InsufficientMemoryError` when none fits), so our support matrix and the
static estimate must size memory the same way. The model is data (memory.yaml: weight terms per
architecture, KV per token, activation coefficients per backend); weight bytes per element come from
quant.yaml's `memory` factors, capacity and runtime overheads from the system YAML (`gpu.mem_capacity`,
`misc.nccl_mem`, `misc.other_mem`). Everything here is bytes; `as_json` reports GiB.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from perfledger.estimator.data.system_specs import load_spec
from perfledger.estimator.errors import EstimatorError
from perfledger.estimator.models.config import ModelConfig, resolve_model
from perfledger.estimator.models.config_expr import ConfigExprError
from perfledger.estimator.models.config_expr import evaluate as evaluate_expr
from perfledger.estimator.models.plans.registry import priced_model
from perfledger.estimator.models.priced import PricedModel
from perfledger.estimator.models.vision import Images, Vision, image_tokens, vision
from perfledger.estimator.quant.profiles import quant_profile
from perfledger.safe_io import data_yaml

MEMORY_YAML = Path(__file__).with_name("memory.yaml")
GIB = float(1 << 30)


class MemoryModelError(EstimatorError):
    """The memory model cannot size this model or system (names the file and key)."""


@dataclass(frozen=True)
class Memory:
    """One GPU's footprint (bytes) and its capacity; `fits` as 0.12.0 decides (total < capacity)."""

    weights: float
    kv: float
    activations: float
    nccl: float
    others: float
    capacity: float
    kv_budget: float = float("inf")  # the backend's KV-cache budget left beside the non-KV memory
    terms: tuple[tuple[str, float], ...] = ()

    @property
    def total(self) -> float:
        return self.weights + self.kv + self.activations + self.nccl + self.others

    @property
    def fits(self) -> bool:
        return self.total < self.capacity

    @property
    def kv_fits(self) -> bool:
        """0.12.0's KV-cache capacity check (only asked when the total fits)."""
        return self.kv <= self.kv_budget

    def as_json(self) -> dict:
        """GiB per GPU, rounded to 0.001, as `estimate static --json` reports it."""
        def g(b):
            return round(b / GIB, 3)
        return {"weights": g(self.weights), "kv": g(self.kv), "activations": g(self.activations),
                "runtime": g(self.nccl + self.others), "total": g(self.total), "capacity": g(self.capacity),
                "fits": self.fits, "kv_budget": g(self.kv_budget), "kv_fits": self.kv_fits, "unit": "GiB per GPU"}


@cache
def _doc(path: Path = MEMORY_YAML) -> dict:
    return data_yaml(path)


def kv_element_bytes(kv_quant: str) -> float:
    """Bytes of one KV cache element at a KV quant (memory.yaml `kv_bytes`)."""
    table = _doc()["kv_bytes"]
    if kv_quant not in table:
        raise MemoryModelError(f"{MEMORY_YAML.name} kv_bytes: unknown KV quant {kv_quant!r}")
    return float(table[kv_quant])


def evaluate(expr: str, names: dict, where: str) -> float:
    """memory.yaml arithmetic, in the expression language the matrix needs share (models/config_expr.py)."""
    try:
        return evaluate_expr(" ".join(expr.split()), names, where)
    except ConfigExprError as exc:
        raise MemoryModelError(str(exc)) from None


def quant_labels(quants: dict) -> tuple[dict[str, str], frozenset]:
    """(label by role, the roles a flag set) from labels or static()'s {role: {"quant", "source"}} (labels alone:
    none flagged)."""
    labels = {role: v["quant"] if isinstance(v, dict) else v for role, v in quants.items()}
    return labels, frozenset(role for role, v in quants.items() if isinstance(v, dict) and v.get("source") == "flag")


def sized_model(model: ModelConfig) -> tuple[str, PricedModel]:
    """(architecture, its PricedModel: what its layer plan reads too); a config missing a dim is a MemoryModelError."""
    try:
        return model.architecture, priced_model(model)
    except ConfigExprError as exc:
        raise MemoryModelError(str(exc)) from None


def weight_bytes(arch: str, names: dict, quants: dict[str, str], backend: str | None = None,
                 flagged: frozenset = frozenset(), layer: str | None = None) -> list[tuple[str, float]]:
    """(term, bytes per GPU) for every weight term of the architecture (memory.yaml); `names`: what its
    expressions read (the model's `as_mapping()` and the deployment's parallelism); a term whose `skip_backends`
    lists `backend` is left out (that backend's kernels fold the op away); `flagged`: the roles whose quant a flag
    set (a term's `checkpoint_bf16_if` exclusion holds only while the GEMM quant is not flagged, as 0.12.0 reads
    the checkpoint's exclusions); `layer`: a large-EP layer form whose own list (`large_ep_weights`) replaces them."""
    entry = _architecture(arch)
    if layer is not None and layer not in entry.get("large_ep_weights", {}):
        raise MemoryModelError(f"{MEMORY_YAML.name} {arch}: no large_ep_weights for the {layer!r} layer")
    out = []
    for term in entry["large_ep_weights"][layer] if layer else entry["weights"]:
        if backend in term.get("skip_backends", ()):
            continue
        role = term["quant"]
        own = None if "gemm" in flagged else names.get(term.get("quant_from", ""))  # the checkpoint's per-category label
        excluded = names.get(term.get("bf16_if", "")) or ("gemm" not in flagged and names.get(term.get("checkpoint_bf16_if", "")))
        label = "bfloat16" if excluded else own or quants.get(role, role)
        per_element = quant_profile("moe" if role == "moe" else "gemm", label).memory
        where = f"{MEMORY_YAML.name} {arch}.{term['name']}"
        out.append((term["name"], summed(term["elements"], names, term.get("over", ()), where) * per_element))
    return out


def summed(expr: str, names: dict, over, where: str) -> float:
    """`expr`, or with `over` (plan dims holding one entry per layer or per layer run, zipped) its sum over the
    entries: a dict entry's keys shadow the model's names (DeciLM's runs), any other binds its own name (a layer's
    flag)."""
    if not over:
        return evaluate(expr, names, where)
    missing = [n for n in over if not isinstance(names.get(n), (tuple, list))]
    if missing:
        raise MemoryModelError(f"{where}: `over` names {missing}, which the model's plan dims hold no sequence for")
    total = 0.0
    for items in zip(*(names[n] for n in over), strict=True):
        scope = dict(names)
        for name, item in zip(over, items, strict=True):
            scope.update(item) if isinstance(item, dict) else scope.__setitem__(name, item)
        total += evaluate(expr, scope, where)
    return total


def flag_overridden(arch: str) -> frozenset[str]:
    """The checkpoint exclusions (`checkpoint_bf16_if` names) a flagged GEMM quant overrides, as 0.12.0 reads them
    (Kimi-K2.5 / DeepSeek-V3 shared experts); empty for an architecture memory.yaml does not size."""
    entry = _doc()["architectures"].get(arch) or {}
    return frozenset(t["checkpoint_bf16_if"] for t in entry.get("weights", ()) if "checkpoint_bf16_if" in t)


def _architecture(arch: str) -> dict:
    known = _doc()["architectures"]
    if arch not in known:
        raise MemoryModelError(f"{MEMORY_YAML.name}: no memory model for architecture {arch!r}; known: {', '.join(known)}")
    return known[arch]


def static_fraction(rule: dict, capacity: float, tp: int, pp: int, dp: int) -> float:
    """The static path's memory fraction (memory.yaml `kv_budget.static`: SGLang's derived mem_fraction_static)."""
    mib = capacity / (1 << 20)
    tier = next(t for t in rule["tiers"] if t["below_mib"] is None or mib < t["below_mib"])
    bs = tier["graph_bs"][1 if tp >= rule["wide_tp"] else 0]
    reserved = (rule["base_mib"] + rule["per_chunk_token_mib"] * tier["chunked_prefill"]
                + tp * pp / 8 * 1024 * rule["parallel_gib_per_8"] + bs * rule["per_graph_bs_mib"])
    if dp > 1:
        reserved += bs * dp * rule["dp_per_graph_bs_mib"]
        if bs > rule["dp_large_bs"]:
            reserved += bs * dp * rule["dp_large_per_graph_bs_mib"]
    if mib > rule["floor_above_mib"]:
        reserved = max(reserved, rule["floor_mib"])
    return round((mib - reserved) / mib, rule["digits"])


def kv_budget_bytes(rule: dict, version: str, capacity: float, non_kv: float, *, static: bool = False, tp: int = 1,
                    pp: int = 1, dp: int = 1) -> float:
    """The backend's KV-cache budget in bytes (memory.yaml `kv_budget`; fraction by version prefix, or on the static
    path the rule's `static` derivation where the backend has one)."""
    prefixes = [k for k in rule["fraction"] if k != "default" and version.startswith(k)]
    fraction = rule["fraction"][max(prefixes, key=len)] if prefixes else rule["fraction"]["default"]
    if static and "static" in rule:
        fraction = static_fraction(rule["static"], capacity, tp, pp, dp)
    scale = (1 - rule["reserved"]) * (1 - rule["tolerance"])
    return (capacity - non_kv) * fraction * scale if rule["of_free"] else capacity * fraction * scale - non_kv


def encoder_bytes(v: Vision, tp: int, batch: int, images: Images) -> tuple[float, float]:
    """(weights, activations) of the vision encoder on one rank for `batch` requests' images (memory.yaml
    `vision_encoder`); (0, 0) without images."""
    if not images.given:
        return 0.0, 0.0
    rule, (post, pre) = _doc()["vision_encoder"], v.tokens(images)
    dp = tp if images.encoder_dp else 1
    shard = 1 if images.encoder_dp else tp
    patches = -(-batch * images.count // dp) * pre
    embeddings = batch * images.count * post * v.out_hidden * v.instances
    act = rule["bytes"] * (patches * v.hidden * rule["patch_widths"] + embeddings)
    return v.weight_elements(shard) * rule["weight_bytes"], max(act, rule["min_bytes"])


def footprint(arch: str, model: PricedModel, system_doc: dict, backend: str, *, tp: int, moe_tp: int, moe_ep: int,
              quants: dict[str, str], batch: int, seq_tokens: int, tokens: int, version: str = "",
              source: str = "system yaml", pp: int = 1, dp: int = 1, nextn: int = 0,
              decode_tokens: int | None = None, terms: list[tuple[str, float]] | None = None,
              static_path: bool = False, flagged: frozenset = frozenset(), encoder: tuple[float, float] = (0.0, 0.0)
              ) -> Memory:
    """The per-GPU memory of one replica shard (pure: the model, the parsed system YAML, the deployment).

    seq_tokens: KV slots per sequence (isl + osl); tokens: tokens in one forward pass (activations);
    version: the backend version (vLLM's default memory fraction depends on it). pp: pipeline stages (weights
    split across them, KV not); dp: attention data parallelism (the MoE workspace spans every rank's tokens);
    nextn: MTP draft tokens, which scale decode activations by nextn + 1: only the `decode_tokens` share of a
    mixed step when given, else every token. terms: this deployment's `weight_bytes`, when the caller sized them
    already (a search sizes one parallel configuration at many batches). static_path: the KV budget of 0.12.0's
    static path (its disagg workers; SGLang derives its fraction there) instead of its agg default. flagged: the
    roles whose quant a flag set (`weight_bytes`). encoder: the vision encoder's (weights, activations) beside it
    (`encoder_bytes`)."""
    doc, entry = _doc(), _architecture(arch)
    if backend not in doc["backends"]:
        raise MemoryModelError(f"{MEMORY_YAML.name}: no activation model for backend {backend!r}")
    dims, names = model.dims, {**model.as_mapping(), "tp": tp, "moe_tp": moe_tp, "moe_ep": moe_ep, "shared_tp": tp}
    terms = weight_bytes(arch, names, quants, backend, flagged) if terms is None else terms
    names["kv_bytes"] = kv_element_bytes(quants.get("kv", "bfloat16"))
    per_token = (evaluate(entry["kv_per_token_bytes"], names, f"{arch}.kv_per_token_bytes") if "kv_per_token_bytes" in entry
                 else evaluate(entry["kv_per_token"], names, f"{arch}.kv_per_token") * names["kv_bytes"]
                 if "kv_per_token" in entry else 0.0)
    per_request = evaluate(entry["kv_per_request"], names, f"{arch}.kv_per_request") if "kv_per_request" in entry else 0.0
    kv = batch * (seq_tokens * per_token + per_request)
    if "kv_per_sequence_bytes" in entry:  # a KV cache not linear in the sequence (window-capped layers, compressed)
        kv += batch * summed(entry["kv_per_sequence_bytes"], {**names, "seq": seq_tokens}, entry.get("kv_over", ()),
                             f"{arch}.kv_per_sequence_bytes")
    be, tp8 = doc["backends"][backend], min(tp, 8)
    coeffs = be["coefficients"].get(entry["family"], be["coefficients"]["default"])
    width = dims.heads * dims.head_dim
    act = 2 * tokens * width * coeffs[tp8]
    if entry["family"] in doc["moe_workspace"] and dims.experts:
        widths = be["workspace_width"]
        ws = dims.hidden if widths.get(entry["family"], widths["default"]) == "hidden" else width
        act += tokens * ws * dp * dims.experts * dims.topk / moe_ep / 128 * 4
    act = max(act, be["min_bytes"])
    if nextn > 0:
        share = tokens if decode_tokens is None or tokens <= 0 else min(max(decode_tokens, 0), tokens)
        act *= (tokens - share + share * (nextn + 1)) / tokens if tokens > 0 else nextn + 1
    act *= 1 + be["activation_overhead"]
    try:
        capacity = float(system_doc["gpu"]["mem_capacity"])
        nccl = float(system_doc["misc"]["nccl_mem"][tp8])
        others = float(system_doc["misc"]["other_mem"]) * (1 + be["others_overhead"])
    except (KeyError, TypeError) as exc:
        raise MemoryModelError(f"{source}: missing gpu.mem_capacity / misc.nccl_mem[{tp8}] / misc.other_mem ({exc})") from None
    act += encoder[1]
    weights = sum(b for _, b in terms) / pp + encoder[0]
    budget = kv_budget_bytes(be["kv_budget"], version, capacity, weights + act + nccl + others, static=static_path,
                             tp=tp, pp=pp, dp=dp)
    return Memory(weights, kv, act, nccl, others, capacity, budget, tuple(terms))


def deployment_memory(model: str | ModelConfig, system: str, backend: str, *, tp: int, moe_tp: int = 1, moe_ep: int = 1,
                      quants: dict[str, str], batch: int, isl: int, osl: int, tokens: int | None = None,
                      version: str = "", pp: int = 1, dp: int = 1, nextn: int = 0, prefix: int = 0,
                      static_path: bool = False, flagged: frozenset = frozenset(), images: Images | None = None
                      ) -> Memory:
    """IO edge: read the model's HF config and the system YAML, then `footprint`.

    tokens defaults to batch × (isl − prefix) (one prefill pass over the uncached tokens, as 0.12.0's run_static
    sizes activations, MTP unscaled); KV holds isl + osl tokens per sequence. images: a VL model's requests carry
    them (0.12.0's run_static): isl grows by their merged tokens and the vision encoder sits beside the model."""
    config = resolve_model(model)
    arch, sized = sized_model(config)
    vit = vision(config, sized.family) if images is not None and images.given else None
    encoder = encoder_bytes(vit, tp, batch, images) if vit else (0.0, 0.0)
    isl += image_tokens(vit, images)
    spec_path = Path(load_spec(system).source)
    tokens = batch * (isl - prefix) if tokens is None else tokens
    return footprint(arch, sized, data_yaml(spec_path), backend, tp=tp, moe_tp=moe_tp, moe_ep=moe_ep,
                     quants=quants, batch=batch, seq_tokens=isl + osl, tokens=tokens,
                     version=version, source=str(spec_path), pp=pp, dp=dp, nextn=nextn, decode_tokens=0,
                     static_path=static_path, flagged=flagged, encoder=encoder)


def static_memory(model: str | ModelConfig, system: str, backend: str, *, tp: int, moe_tp: int, moe_ep: int, quants: dict,
                  batch: int, isl: int, osl: int, version: str = "", pp: int = 1, dp: int = 1, nextn: int = 0,
                  prefix: int = 0, images: Images | None = None) -> dict | None:
    """The `memory` object of `estimate static --json` (GiB per GPU, 0.12.0's run_static: its static-path KV budget),
    or None for an architecture memory.yaml cannot size. quants: labels by role, or static()'s {role: {"quant", "source"}};
    images: each request's (`deployment_memory`)."""
    labels, flagged = quant_labels(quants)
    try:
        return deployment_memory(model, system, backend, tp=tp, moe_tp=moe_tp, moe_ep=moe_ep, quants=labels,
                                 batch=batch, isl=isl, osl=osl, version=version, pp=pp, dp=dp, nextn=nextn,
                                 prefix=prefix, static_path=True, flagged=flagged, images=images).as_json()
    except MemoryModelError:
        return None
