"""Per-layer heterogeneous GQA layer plan (`kind` nas: DeciLM / Llama-Nemotron-Super, NAS-searched blocks).

Each layer of the config's `block_configs` has its own attention (a KV-group size, or none) and its own FFN width
(`ffn_mult`, or none); runs of equal consecutive blocks form one group whose ops repeat by the run length, and ops
of the same kind share one name across groups (summed, as 0.12.0 reports them). The op list reproduces what
aiconfigurator-core 0.12.0 prices for its NEMOTRONNAS family: no q/k norm, the o / down projections priced at
the GEMM quant with an unquantized input, a TP allreduce after each present attention and FFN, no embedding
allreduce, logits in bfloat16 in both phases. FFN width = 2·ffn_mult·hidden/3 rounded up to a multiple of
models.yaml `ffn_round`.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from perfledger.estimator.errors import EstimatorError
from perfledger.estimator.fit.roofline import elementwise_bytes
from perfledger.estimator.models.config import ModelConfig
from perfledger.estimator.models.priced import PricedModel


@dataclass(frozen=True)
class BlockGroup:
    """A run of equal consecutive blocks: KV heads (0: no attention), FFN width (0: no FFN), run length."""

    kv_heads: int
    inter: int
    count: int


@dataclass(frozen=True)
class NasDims:
    groups: tuple[BlockGroup, ...]


def dims(model: ModelConfig, family: dict) -> NasDims:
    """The block runs of `block_configs` (attention.n_heads_in_group / no_op, ffn.ffn_mult / no_op)."""
    t = model.text
    blocks = t.get("block_configs")
    if not isinstance(blocks, list) or not blocks:
        raise EstimatorError(f"{model.path}: DeciLM config without block_configs")
    heads, hidden, rounding = int(t["num_attention_heads"]), int(t["hidden_size"]), int(family["ffn_round"])

    def shape(block: dict) -> tuple[int, int]:
        attn, ffn = block.get("attention") or {}, block.get("ffn") or {}
        kv = 0 if attn.get("no_op") else heads // int(attn["n_heads_in_group"])
        if ffn.get("no_op"):
            return kv, 0
        inter = int(2 * float(ffn.get("ffn_mult", family["default_ffn_mult"])) * hidden / 3)
        return kv, -(-inter // rounding) * rounding

    return NasDims(tuple(BlockGroup(kv, inter, len(list(run))) for (kv, inter), run in groupby(map(shape, blocks))))


def ops(m: PricedModel, d, tokens: int, context: bool, batch: int, seq: int) -> list[tuple[str, str, dict, float]]:
    """(name, op, query, scale) for one forward pass at `tokens` tokens (scale = the group's run length)."""
    dims, tp = m.dims, d.tp
    h = dims.hidden
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    gemm = lambda n, k, quant=None: {**base, "quant": quant or d.gemm_quant, "m": tokens, "n": n, "k": k,  # noqa: E731
                                     "low_precision_input": False}
    mem = lambda dim_in, dim_out: {"bytes": elementwise_bytes(dim_in, dim_out, tokens)}  # noqa: E731
    ar = {**base, "tp": tp, "elements": tokens * h}
    width = dims.heads * dims.head_dim // tp
    out = [("embedding", "mem", {"bytes": tokens * h * 2}, 1)]
    for g in m.plan_dims.groups:
        if g.kv_heads:
            kv = -(-g.kv_heads // tp)
            attn = {**base, "kv_quant": d.kv_quant, "head_dim": dims.head_dim, "window": 0, "kv_heads": kv,
                    "heads": dims.heads // tp, "batch": batch, "lane_defaults": True}
            attn = ({**attn, "fmha_quant": d.fmha_quant, "isl": seq, "qk_norm": False} if context
                    else {**attn, "seq": seq})
            out += [("add_norm_1", "mem", mem(2 * h, 2 * h), g.count),
                    ("qkv_gemm", "gemm", gemm(width + dims.head_dim * kv * 2, h), g.count),
                    ("attention", "attention" if context else "generation_attention", attn, g.count),
                    ("proj_gemm", "gemm", gemm(h, width), g.count), ("ar_1", "allreduce", ar, g.count)]
        if g.inter:
            inter = g.inter // tp
            out += [("add_norm_2", "mem", mem(2 * h, 2 * h), g.count),
                    ("gate_ffn1_gemm", "gemm", gemm(2 * g.inter // tp, h), g.count),
                    ("act_gate", "mem", mem(2 * g.inter // tp, inter), g.count),
                    ("ffn2_gemm", "gemm", gemm(h, inter), g.count), ("ar_2", "allreduce", ar, g.count)]
    out.append(("logits_gemm", "gemm", {**gemm(dims.vocab // tp, h, "bfloat16"), "m": batch}, 1))
    return out
