"""In-flight batching steps as op lists: one mixed step (a context chunk beside decode requests) and one decode-only step.

0.12.0 prices a mixed step in three passes, and so does `mixed_step`: (1) every non-attention op of the context pass
over the step's whole token count (context tokens, less a cached prefix per whole request in the chunk, + decode
requests × (nextn + 1); one sequence for the logits; GDN / Mamba-2 state kernels over that whole token count as one
sequence, models.yaml `mixed_step_whole_tokens`); (2) context attention of the chunk's requests, ceil(ctx / isl)
sequences of isl tokens over the prefix, divided by ceil(isl / ctx) (a chunk smaller than isl prices that share of
one request's prefill); (3) decode attention of the decode requests
at the mean kv length isl + osl // 2 + 1. A decode-only step is one decode pass of the requests at that length.
Op names follow the reference's step breakdown (`context_attention (scaled)`, `generation_attention`).
Passes (2) and (3) take the ops *named* `attention` (as 0.12.0 splits by op name): GQA attention, GLM-5's DSA
module, K3's split MLA kernel; a plan whose attention is a whole block under another name (DeepSeek's `mla_block`,
K3's vLLM MLA module) prices it in pass (1) at one sequence of isl and has empty passes (2) and (3), as 0.12.0 does.
"""

from __future__ import annotations

from math import ceil

from perfledger.estimator.models.cached_prefix import causal_prefix
from perfledger.estimator.models.config import catalog
from perfledger.estimator.models.priced import PricedModel
from perfledger.estimator.static import Deploy, pass_ops

ATTENTION = "attention"  # the op name passes (2) and (3) price
DECODE_ATTENTION = "generation_attention"
SCALED_CONTEXT = "context_attention (scaled)"


def decode_seq(isl: int, osl: int) -> int:
    """The kv length a decode step is priced at: the middle of the output."""
    return isl + osl // 2 + 1


def mixed_step(m: PricedModel, d: Deploy, *, ctx_tokens: int, gen_requests: int, isl: int, osl: int,
               prefix: int = 0) -> list:
    """The op list (name, op, query, scale) of one mixed step; `d` carries the worker's parallelism and nextn;
    `prefix`: cached tokens of each request's isl."""
    if ctx_tokens < 1 or gen_requests < 0:
        raise ValueError(f"a mixed step needs ctx_tokens >= 1 and gen_requests >= 0 (got {ctx_tokens}, {gen_requests})")
    decode_tokens = gen_requests * (d.nextn + 1)
    tokens = ctx_tokens - prefix * (ctx_tokens // isl) + decode_tokens
    whole, cached = catalog()["mixed_step_whole_tokens"], prefix * (ctx_tokens // isl)
    shared = [(name, op, {**query, "seq": tokens} if op in whole else query, scale)
              for name, op, query, scale in pass_ops(m, d, tokens, True, 1, isl,
                                                     cached=causal_prefix(cached, tokens + cached))]
    ops = [op for op in shared if op[0] != ATTENTION]
    if len(ops) == len(shared):
        return ops
    chunk = ceil(ctx_tokens / isl)
    attention = [op for op in pass_ops(m, d, chunk * isl, True, chunk, isl, prefix=prefix) if op[0] == ATTENTION]
    ops += [(SCALED_CONTEXT, op, query, scale / ceil(isl / ctx_tokens)) for _, op, query, scale in attention]
    if gen_requests:
        decode = pass_ops(m, d, gen_requests, False, gen_requests, decode_seq(isl, osl))
        ops += [(DECODE_ATTENTION, op, query, scale) for name, op, query, scale in decode if name == ATTENTION]
    return ops


def decode_step(m: PricedModel, d: Deploy, *, gen_requests: int, isl: int, osl: int) -> list:
    """The op list of one decode-only step of `gen_requests` requests (each verifying nextn + 1 tokens)."""
    return pass_ops(m, d, gen_requests, False, gen_requests, decode_seq(isl, osl))
