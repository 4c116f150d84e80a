"""Static whole-model estimates: per-layer op lists priced through the batch API, summed serially.

TTFT = Σ context ops × scale; TPOT = Σ over decode steps (stride 32, weighted by repeats) / (osl − 1).
Quants left unset on the `Deploy` follow the checkpoint (`checkpoint_quant.py`), else bfloat16.
Dense GQA layers: norm, qkv GEMM, attention, o-proj, norm, gate/up GEMM, act, down GEMM (+ TP allreduces);
MoE layers replace the MLP with router GEMM, dispatch, MoE block, combine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import polars as pl
import yaml

from perfledger.estimator.batch import estimate
from perfledger.estimator.checkpoint_quant import resolve as resolve_quants
from perfledger.estimator.errors import EstimatorError, UnsupportedModelError
from perfledger.estimator.glm5 import glm5_dims, glm5_ops
from perfledger.estimator.kimi_k3 import k3_dims, k3_ops
from perfledger.estimator.sol import elementwise_bytes, mem_op_latency
from perfledger.estimator.specs import REPO_ROOT, wheel_systems_dir

MODELS_YAML = Path(__file__).with_name("models.yaml")


@lru_cache(maxsize=None)
def _catalog() -> dict:
    return yaml.safe_load(MODELS_YAML.read_text())


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


def model_config_path(name: str) -> Path:
    """<org>--<name>_config.json from the wheel's model_configs/ or ../shared/aic/model_configs/."""
    stem = name.replace("/", "--")
    dirs = [REPO_ROOT / ".." / "shared" / "aic" / "model_configs"]
    if wheel_systems_dir() is not None:
        dirs.insert(0, wheel_systems_dir().parent / "model_configs")
    for d in dirs:
        if (d / f"{stem}_config.json").is_file():
            return d / f"{stem}_config.json"
    raise EstimatorError(f"no model config {stem}_config.json in {', '.join(map(str, dirs))}")


def load_model(name: str) -> dict:
    """HF config → dims dict; `name` is 'Org/Model' or 'Org--Model'."""
    path = model_config_path(name)
    cfg = json.loads(path.read_text())
    arch = (cfg.get("architectures") or ["?"])[0]
    family = _catalog()["architectures"].get(arch)
    gap = (_catalog().get("unsupported") or {}).get(arch)
    if family is None and gap is not None:
        hint = f"; {gap['instead']}" if gap.get("instead") else ""
        raise UnsupportedModelError(f"{path}: static estimates for {arch} need op families not priced yet: "
                                    f"{'; '.join(gap['needs'])}{hint}")
    if family is None:
        raise EstimatorError(f"{path}: architecture {arch!r} not in {MODELS_YAML.name}")
    if family["kind"] == "kimi_k3":
        return {**k3_dims(cfg), **family, "name": name}
    if family["kind"] == "glm5":
        return {**glm5_dims(cfg, path, family), **family, "name": name}
    dims = {k: cfg.get(v) for k, v in _catalog()["fields"].items()}
    dims["head_dim"] = dims["head_dim"] or dims["hidden"] // dims["heads"]
    return {**dims, **family, "name": name}


def _ops(m: dict, d: Deploy, tokens: int, context: bool, batch: int, seq: int) -> list[tuple[str, str, dict, float]]:
    """(name, op, query, scale) for one forward pass at `tokens` tokens (quants already resolved)."""
    if m["kind"] == "kimi_k3":
        return k3_ops(m, d, tokens, context, batch, seq)
    if m["kind"] == "glm5":
        return glm5_ops(m, d, tokens, context, batch, seq)
    L, h, tp = m["layers"], m["hidden"], d.tp
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    # Router and logits GEMMs stay bf16 in a quantized checkpoint; the o / down projections read an already
    # quantized input (fp8_static: no scale_matrix pass), as 0.12.0 prices them.
    gemm = lambda mm, n, k, quant=None, lp=False: {**base, "quant": quant or d.gemm_quant, "m": mm, "n": n, "k": k,  # noqa: E731
                                                   "low_precision_input": lp}
    heads, kv_heads = m["heads"] // tp, max(m["kv_heads"] // tp, 1)
    ops = [("embedding", "mem", {"bytes": tokens * h * 2}, 1),
           ("add_norm_1", "mem", {"bytes": elementwise_bytes(2 * h, 2 * h, tokens)}, L),
           ("qkv_gemm", "gemm", gemm(tokens, (heads + 2 * kv_heads) * m["head_dim"], h), L)]
    if context:
        ops.append(("attention", "attention", {**base, "fmha_quant": d.fmha_quant, "kv_quant": d.kv_quant, "head_dim": m["head_dim"],
                                               "window": 0, "kv_heads": kv_heads, "heads": heads, "isl": seq, "batch": batch,
                                               "qk_norm": bool(m.get("qk_norm", False)), "lane_defaults": True}, L))
    else:
        ops.append(("attention", "generation_attention", {**base, "kv_quant": d.kv_quant, "head_dim": m["head_dim"], "window": 0,
                                                          "kv_heads": kv_heads, "heads": heads, "batch": batch, "seq": seq,
                                                          "lane_defaults": True}, L))
    ops += [("proj_gemm", "gemm", gemm(tokens, h, heads * m["head_dim"], lp=True), L),
            ("add_norm_2", "mem", {"bytes": elementwise_bytes(2 * h, 2 * h, tokens)}, L)]
    ar = {**base, "tp": tp, "elements": tokens * h}
    if m["kind"] == "dense":
        inter = m["inter"] // tp
        ops += [("gate_ffn1_gemm", "gemm", gemm(tokens, 2 * inter, h), L),
                ("act_gate", "mem", {"bytes": elementwise_bytes(2 * inter, inter, tokens)}, L),
                ("ffn2_gemm", "gemm", gemm(tokens, h, inter, lp=True), L),
                ("ar_1", "allreduce", ar, L), ("ar_2", "allreduce", ar, L)]
    else:
        moe = {**base, "quant": d.moe_quant, "distribution": m["distribution"], "gated": True, "topk": m["topk"],
               "experts": m["experts"], "hidden": h, "inter": m["moe_inter"], "tp": d.moe_tp, "ep": d.moe_ep, "tokens": tokens}
        dispatch = {**base, "tp": d.moe_tp * d.moe_ep, "elements": tokens * h}
        ops += [("router_gemm", "gemm", gemm(tokens, m["experts"], h, "bfloat16"), L), ("moe_pre_dispatch", "allreduce", dispatch, L),
                ("moe", "moe", moe, L), ("moe_post_dispatch", "allreduce", dispatch, L)]
    ops.append(("embedding_ar", "allreduce", ar, 1))
    if not context or m["kind"] == "dense":
        ops.append(("logits_gemm", "gemm", gemm(batch, m["vocab"] // tp, h, "bfloat16"), 1))
    return ops


def check_moe_alignment(m: dict, d: Deploy, config: Path) -> None:
    """A block-quantized MoE whose per-GPU intermediate size splits a weight block is no valid deployment
    (models.yaml `moe_block_alignment`; 0.12.0 rejects it too), so it is refused instead of priced."""
    rule = m.get("moe_block_alignment")
    if not rule or d.moe_quant != rule["quant"]:
        return
    qcfg = json.loads(config.read_text()).get("quantization_config") or {}
    block = int((qcfg.get("weight_block_size") or [rule["default_block"]])[0])
    if (m["moe_inter"] // d.moe_tp) % block:
        raise UnsupportedModelError(f"{config}: moe_intermediate_size {m['moe_inter']} / moe_tp {d.moe_tp} = "
                                    f"{m['moe_inter'] // d.moe_tp} is not a multiple of the {d.moe_quant} weight block "
                                    f"{block} (quantization_config.weight_block_size); use a smaller moe_tp or moe_ep")


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
        else:
            out[name] = float(estimate(est, op, pl.DataFrame({k: [v] for k, v in query.items()}), mode=mode)["latency_ms"][0]) * scale
    return out


def static(est, model: str, d: Deploy, *, batch: int, isl: int, osl: int, mode: str = "silicon") -> dict:
    """{"ttft_ms", "tpot_ms", "quants": {q: {quant, source}}, "context": {op: ms}, "generation": {op: ms}}."""
    m = load_model(model)
    quants = resolve_quants(model_config_path(model), d.backend, {"gemm": d.gemm_quant, "moe": d.moe_quant,
                                                                  "kv": d.kv_quant, "fmha": d.fmha_quant})
    d = replace(d, **{f"{q}_quant": v["quant"] for q, v in quants.items()})
    if m.get("backends") and d.backend not in m["backends"]:
        raise UnsupportedModelError(f"{model}: the {m['kind']} layer plan is assembled for backends "
                                    f"{', '.join(m['backends'])} only ({MODELS_YAML.name} `backends`), not {d.backend}")
    check_moe_alignment(m, d, model_config_path(model))
    spec = est.spec(d.system)
    context = price(est, _ops(m, d, batch * isl, True, batch, isl), spec, mode)
    generation: dict[str, float] = {}
    stride = _catalog()["decode_stride"]
    for i in range(0, osl - 1, stride):
        repeat = min(stride, osl - 1 - i)
        for name, ms in price(est, _ops(m, d, batch, False, batch, isl + i + 1), spec, mode).items():
            generation[name] = generation.get(name, 0.0) + ms * repeat
    ttft = sum(context.values())
    tpot = sum(generation.values()) / (osl - 1) if osl > 1 else 0.0
    return {"ttft_ms": ttft, "tpot_ms": tpot, "quants": quants, "context": context, "generation": generation}
