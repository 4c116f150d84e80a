"""Default quants of a static estimate, read from the checkpoint the way aiconfigurator-core 0.12.0 reads them.

Without this an FP8 or NVFP4 checkpoint would be priced at bf16 unless every quant flag is passed. The
rules (which fields name the algorithm, algorithm -> GEMM/MoE/KV/FMHA labels, per-layer ModelOpt and
compressed-tensors readings, backend guards) are data in `checkpoint_quant.yaml`; this module interprets
them. Precedence per quant: an explicit flag, else the checkpoint, else the YAML default; the answer says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from perfledger.estimator.errors import EstimatorError, UnsupportedModelError
from perfledger.estimator.models.config import ModelConfig
from perfledger.safe_io import data_yaml

RULES_YAML = Path(__file__).with_name("checkpoint_quant.yaml")
QUANTS = ("gemm", "moe", "kv", "fmha")


@cache
def rules_doc() -> dict:
    return data_yaml(RULES_YAML)


def exclusion_globs(model: ModelConfig) -> list[str]:
    """Every module-exclusion glob of the checkpoint: its quantization_config (a multimodal one's under text_config,
    where Kimi-K2.5 keeps `re:.*self_attn.*`) and the ModelOpt hf_quant section."""
    q = model.config.get("quantization_config")
    if not isinstance(q, dict):
        q = (model.config.get(rules_doc()["nested_config_key"]) or {}).get("quantization_config") or {}
    globs = [*(q.get("modules_to_not_convert") or []), *(q.get("exclude_modules") or []), *(q.get("ignore") or [])]
    globs += [*(model.hf_quant.get("exclude_modules") or []), *(model.hf_quant.get("ignore") or [])]
    return [str(g) for g in globs]


def attention_bf16(globs: list[str], rules: dict) -> dict[str, bool]:
    """Projection group -> kept unquantized. A block glob (names the block, no projection) covers every group."""
    groups = rules["attention_groups"]
    markers = [m for ms in groups.values() for m in ms]
    if any(rules["attention_block"] in g and not any(m in g for m in markers) for g in globs):
        return dict.fromkeys(groups, True)
    return {name: any(m in g for g in globs for m in ms) for name, ms in groups.items()}


@dataclass(frozen=True)
class Unquantized:
    """What the checkpoint keeps in bf16 (checkpoint_quant.yaml `unquantized_modules`); static plans and memory.yaml read it."""

    attention: dict[str, bool]  # attention projection group -> kept unquantized
    shared: bool  # the shared experts

    def flags(self) -> dict[str, bool]:
        """memory.yaml's `bf16_if` names: `<group>_bf16` per attention projection group, `down_bf16` (the fused q_a +
        kv_a down projection: both q and kv kept) and `shared_bf16`."""
        return {**{f"{group}_bf16": bf16 for group, bf16 in self.attention.items()},
                "down_bf16": bool(self.attention.get("q") and self.attention.get("kv")), "shared_bf16": self.shared}

    def without(self, names: frozenset[str]) -> Unquantized:
        """These parts (`flags()` names) quantized after all: the exclusions a flagged GEMM quant overrides."""
        return Unquantized({group: bf16 and f"{group}_bf16" not in names for group, bf16 in self.attention.items()},
                           self.shared and "shared_bf16" not in names)


def unquantized_parts(model: ModelConfig) -> Unquantized:
    """The checkpoint's unquantized attention groups and shared experts, from its exclusion globs."""
    rules, globs = rules_doc()["unquantized_modules"], exclusion_globs(model)
    return Unquantized(attention_bf16(globs, rules), any(rules["shared_experts"] in g for g in globs))


def _quant_config(cfg: dict, hf: dict, r: dict) -> dict:
    """quantization_config: top level, else the multimodal nested one, else the hf section standing in."""
    qc = cfg.get("quantization_config")
    if not isinstance(qc, dict):
        qc = (cfg.get(r["nested_config_key"]) or {}).get("quantization_config")
    if isinstance(qc, dict):
        return qc
    stand_in = {key: next((hf[f] for f in fields if hf.get(f)), None) for key, fields in r["hf_stand_in"].items()}
    return {k: str(v).lower() for k, v in stand_in.items() if v}


def _first(fields: list, sections: dict) -> str | None:
    value = next((sections[s].get(f) for s, f in fields if sections[s].get(f)), None)
    return str(value).strip().lower() or None if value is not None else None


def _dynamic(qc: dict) -> bool | None:
    """Activation scheme: explicit dynamic/static, else any config group's `dynamic` flag, else unknown."""
    scheme = str(qc.get("activation_scheme", "")).lower()
    if scheme in ("dynamic", "static"):
        return scheme == "dynamic"
    flags = [bool(item["dynamic"]) for group in (qc.get("config_groups") or {}).values() if isinstance(group, dict)
             for item in (group.get("input_activations"), group.get("weights")) if isinstance(item, dict) and "dynamic" in item]
    return any(flags) if flags else None


def _pick(label, dynamic: bool | None) -> str:
    return (label["dynamic"] if dynamic is True else label["static"]) if isinstance(label, dict) else label


def _weights_label(weights: dict, table: list, with_group: bool) -> str | None:
    """The first table row matching a config group's weight spec (bits, type substring, optional group size)."""
    bits, kind = weights.get("num_bits"), str(weights.get("type", "")).lower()
    for row in table:
        group_ok = not with_group or row.get("group_size") in (None, weights.get("group_size"))
        if bits == row["bits"] and row["type"] in kind and group_ok:
            block_weights = str(weights.get("strategy", "")).lower() == "block" or weights.get("block_structure")
            block = row.get("block_label") and block_weights
            return row["block_label"] if block else row["label"]
    return None


def _compressed_tensors(qc: dict, r: dict) -> dict[str, str]:
    ct = r["compressed_tensors"]
    base = next((lbl for g in (qc.get("config_groups") or {}).values()
                 if (lbl := _weights_label((g or {}).get("weights") or {}, ct["weights"], False))), None)
    if base is None:
        return {}
    ignore = [str(p).lower() for p in qc.get("ignore") or []]
    out = {}
    if not any(k in p for p in ignore for k in ct["ignore_attention"]):
        out["gemm"] = base
    if not any(ct["ignore_experts"] in p and ct["ignore_shared_experts"] not in p for p in ignore):
        out["moe"] = base
    return out


def _is_expert(target: str, marks: dict) -> bool:
    t = target.lower()
    return marks["not"] not in t and (any(m in t for m in marks["any"]) or t.endswith(marks["endswith"]))


def _named_algo(section: dict):
    """The algorithm a per-layer / config-group section names, under any of its key spellings."""
    return section.get("quant_algo") or section.get("quantization_algo") or section.get("quant_method")


def _mixed_precision(qc: dict, hf: dict, dynamic: bool | None, r: dict) -> dict[str, str]:
    """ModelOpt per-layer algorithms, split into routed experts (MoE) and everything else (GEMM)."""
    mp = r["mixed_precision"]
    norm = lambda a: mp["layer_aliases"].get(str(a).strip().lower(), str(a).strip().lower()) if a else None  # noqa: E731
    found = {"gemm": set(), "moe": set()}

    def add(target, algo) -> None:
        if algo := norm(algo):
            found["moe" if _is_expert(str(target), mp["expert_markers"]) else "gemm"].add(algo)

    for layers in (hf.get("quantized_layers"), qc.get("quantized_layers")):
        for target, meta in (layers or {}).items():
            add(target, _named_algo(meta) if isinstance(meta, dict) else meta)
    for group in (qc.get("config_groups") or {}).values():
        w = (group or {}).get("weights") or {}
        algo = norm(_named_algo(w)) or _weights_label(w, mp["group_bits"], True)
        for target in (group or {}).get("targets") or [] if algo else []:
            add(target, algo)
    out = {}
    base = str(qc.get("quant_method", "")).lower()
    if base == "fp8":
        out["gemm"] = "fp8_block" if qc.get("weight_block_size") else _pick(r["algos"]["fp8"]["gemm"], dynamic)
    for quant in ("gemm", "moe"):
        if quant not in out:
            hit = next((label for algo, label in mp[quant] if algo in found[quant]), None)
            if hit:
                out[quant] = _pick(hit, dynamic)
    return out


def _kv(qc: dict, sections: dict, r: dict, where: str) -> str | None:
    raw = _first(r["kv_fields"], sections)
    if raw is not None:
        if raw not in r["kv_aliases"]:
            raise EstimatorError(f"{where}: KV cache dtype {raw!r} is not in {RULES_YAML.name} kv_aliases")
        return r["kv_aliases"][raw]
    scheme, ks = qc.get("kv_cache_scheme"), r["kv_scheme"]
    if not isinstance(scheme, dict):
        return None
    kind, bits = str(scheme.get("type", "")).lower(), scheme.get("num_bits")
    if any(t in kind for t in ks["fp8_types"]):
        return "fp8"
    if kind == ks["float_type"] and isinstance(bits, int):
        return "fp8" if bits <= ks["fp8_max_bits"] else "bfloat16" if bits >= ks["bf16_min_bits"] else None
    return None


def infer(cfg: dict, hf: dict, where: str = "checkpoint") -> dict[str, str]:
    """The quants the checkpoint sets (a subset of gemm/moe/kv/fmha), before defaults and backend guards."""
    r = rules_doc()
    qc = _quant_config(cfg, hf, r)
    sections = {"hf": hf, "config": qc}
    algo = _first(r["algo_fields"], sections)
    algo = r["algo_aliases"].get(algo, algo)
    if algo == r["block_scaled"]["algo"] and qc.get(r["block_scaled"]["field"]):
        algo = r["block_scaled"]["becomes"]
    kv = _kv(qc, sections, r, where)
    dynamic = _dynamic(qc)
    out: dict[str, str] = {}
    if algo is not None:
        spec = r["algos"].get(algo)
        if spec is None:
            raise EstimatorError(f"{where}: quant algorithm {algo!r} is not in {RULES_YAML.name} algos")
        rule = spec.get("rule")
        out = (_mixed_precision(qc, hf, dynamic, r) if rule == "mixed_precision" else _compressed_tensors(qc, r)
               if rule == "compressed_tensors" else {q: _pick(spec[q], dynamic) for q in ("gemm", "moe")})
    arch = (cfg.get("architectures") or [None])[0]
    over = r["architectures"].get(arch) or {}
    cond = over.get("moe_if")
    if cond and str(cfg.get(cond["field"], "")).lower() == cond["equals"] and out.get("moe") != cond["unless"]:
        out["moe"] = cond["label"]
    if kv:
        out["kv"] = kv
    if "kv" in over:
        out["kv"] = over["kv"]
    fp8 = r["fmha_fp8"]
    if algo is not None and (algo in fp8["algos"] or kv == fp8["kv"]):
        out["fmha"], out["kv"] = "fp8", fp8["kv"]
    return out


def resolve(model: ModelConfig, backend: str, flags: dict[str, str | None], *,
            builder_guards: bool = True) -> dict[str, dict[str, str]]:
    """{quant: {"quant": label, "source": "flag" | "checkpoint" | "default"}} for gemm, moe, kv, fmha.

    builder_guards: apply `fmha_bf16`, the guards 0.12.0's model builder adds on its estimate path; its planner
    settles the FMHA by data alone (quant/context_fmha.py), so the planner turns them off."""
    r = rules_doc()
    cfg, hf = model.config, model.hf_quant
    arch = (cfg.get("architectures") or [None])[0]
    found = infer(cfg, hf, str(model.path))
    guard = r["fmha_bf16"]
    if builder_guards and found.get("fmha") == "fp8" and (
            backend in guard["backends"] or backend in guard["architectures"].get(arch, ())):
        found["fmha"] = "bfloat16"
    remap = r["vllm_moe_remap"]
    if backend == "vllm" and arch in remap["architectures"] and found.get("moe") == remap["from"]:
        found["moe"] = remap["to"]
    out = {}
    for q in QUANTS:
        if flags.get(q) is not None:
            out[q] = {"quant": flags[q], "source": "flag"}
        elif q in found:
            out[q] = {"quant": found[q], "source": "checkpoint"}
        else:
            out[q] = {"quant": r["defaults"][q], "source": "default"}
    return out


def planner_moe(quants: dict[str, dict[str, str]], model: ModelConfig, backend: str,
                sm_version: int | None) -> dict[str, dict[str, str]]:
    """`quants` with the MoE quant 0.12.0's planner prices an inferred MoE at on this backend and GPU generation
    (`planner_moe_remap`: by model name, or by architecture and checkpoint label); a flagged MoE quant stands."""
    if quants["moe"]["source"] == "flag" or sm_version is None:
        return quants
    for rule in rules_doc()["planner_moe_remap"]:
        named = model.name in rule["models"] if "models" in rule else (
            model.architecture in rule["architectures"] and quants["moe"]["quant"] == rule["from"])
        generation = rule["min_sm_version"] <= sm_version <= rule.get("max_sm_version", sm_version)
        if named and generation and backend in rule["backends"]:
            return {**quants, "moe": {"quant": rule["moe"], "source": quants["moe"]["source"]}}
    return quants


def check_planner_checkpoint(model: ModelConfig, sm_version: int | None) -> None:
    """Refuse a checkpoint 0.12.0's planner refuses on this GPU generation whatever the quants
    (`planner_refused_checkpoints`), naming the checkpoint to use instead."""
    for refusal in rules_doc()["planner_refused_checkpoints"]:
        if sm_version in refusal["sm_versions"] and model.name in refusal["instead"]:
            raise UnsupportedModelError(f"{model.name} {refusal['reason']} (sm {sm_version}); use "
                                        f"{refusal['instead'][model.name]} instead")
