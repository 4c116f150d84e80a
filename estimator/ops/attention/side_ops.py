"""Per-call side memory ops of context attention (RoPE, KV write, optional q/k norm), priced from YAML.

The reference charges these on every context-attention call at a fixed size, so the term is constant in
isl and batch for one shape; attention_side.yaml holds the measured coefficients (data, not code).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

from perfledger.estimator.data.system_specs import SystemSpec
from perfledger.safe_io import data_yaml

SIDE_YAML = Path(__file__).with_name("attention_side.yaml")


@cache
def _doc(path: Path = SIDE_YAML) -> dict:
    doc = data_yaml(path)
    body = doc.get("context") if isinstance(doc, dict) else None
    if not isinstance(body, dict) or "multiplier" not in body or "ops" not in body:
        raise ValueError(f"{path}: needs context.multiplier and context.ops")
    for group in ("ops", "qk_norm_ops"):
        for name, op in (body.get(group) or {}).items():
            if not isinstance(op, dict) or set(op) != {"q", "kv"}:
                raise ValueError(f"{path}: context.{group}.{name} needs exactly keys q and kv")
    return body


def _coef(value, fmha: str, where: str) -> float:
    if isinstance(value, dict):
        if fmha not in value:
            raise KeyError(f"{SIDE_YAML.name}: {where} has no entry for fmha quant {fmha!r}")
        return float(value[fmha])
    return float(value)


def side_terms(fmha: str, qk_norm: bool) -> tuple[float, float, int]:
    """(bytes per q-head element, bytes per kv-head element, op count) already × multiplier for bytes."""
    body = _doc()
    ops = dict(body["ops"])
    if qk_norm:
        ops.update(body.get("qk_norm_ops") or {})
    q = sum(_coef(op["q"], fmha, f"{name}.q") for name, op in ops.items())
    kv = sum(_coef(op["kv"], fmha, f"{name}.kv") for name, op in ops.items())
    return q, kv, len(ops)


def side_latency(spec: SystemSpec, fmha: str, qk_norm: bool, heads, kv_heads, head_dim, sol_only: bool = False):
    """Side-op latency in ms per call (arrays over heads); SOL variant = bytes / unscaled mem_bw."""
    mult = float(_doc()["multiplier"])
    q, kv, count = side_terms(fmha, qk_norm)
    nbytes = mult * float(head_dim) * (q * np.asarray(heads, dtype=np.float64) + kv * np.asarray(kv_heads, dtype=np.float64))
    if sol_only:
        return nbytes / spec.mem_bw * 1000.0
    return (nbytes / (spec.mem_bw * spec.mem_bw_scaling) + mult * count * spec.mem_const_latency) * 1000.0
