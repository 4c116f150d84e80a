"""DSA prefill with context parallelism (CP): per-layer DSA + MoE + comm in series, × num_layers.

DSA_cp = base(b, ceil(isl/cp), prefix) + [mqa(isl)/cp − mqa(chunk)] + [topk_last(isl)/cp − topk_flat(chunk)]
         + all-gather(cp, b·isl·index_head_dim) + all-gather(cp, b·isl·(kv_lora + rope));
MoE at the full b·isl tokens; comm = all-gather + reduce-scatter of b·isl·hidden on the MoE group
(all-to-all pair when the group is expert-parallel). Sparse lookups never extrapolate: an isl outside
the collected grid is a NoDataError. Message sizes are element counts.
Skip-indexer layers (GLM-5.2's shared top-k index: config `indexer_types` entries other than "full") run
no indexer, so they pay the skip-indexer base row + the latent all-gather only (no mqa/top-k deltas, no
all-gather of the index key); per layer dsa = w·full + (1 − w)·skip with w the config's full share.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import polars as pl
import yaml

from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import EstimatorError, NoDataError
from perfledger.estimator.fit.grid import Grid, interpolate, rows_grid, table_slice
from perfledger.estimator.models.config import ModelConfig, model_config

DSA_YAML = Path(__file__).with_name("dsa_prefill.yaml")
AXES = ("isl", "batch_size", "step")


@cache
def _lanes() -> dict:
    return yaml.safe_load(DSA_YAML.read_text())



def _grid(est, system, backend, version, table: str, filters: dict) -> Grid:
    def build():
        rows = table_slice(est, system, backend, version, table, filters)
        return rows_grid(rows, AXES, lambda q: 1.0, sqrt_axes=("isl",))

    return est.memo(("dsa_grid", system, backend, version, table, tuple(sorted(filters.items()))), build)


def _at(grid: Grid, table: str, isl: int, batch: int, prefix: int) -> float:
    value = interpolate(grid, {"isl": isl, "batch_size": batch, "step": prefix})
    if value is None:
        raise NoDataError(f"{table}: isl={isl} batch={batch} prefix={prefix} is outside the collected grid")
    return value


def _op(est, op_family: str, **query) -> float:
    return float(estimate(est, op_family, pl.DataFrame({k: [v] for k, v in query.items()}))["latency_ms"][0])


def full_fraction(cfg: dict, dflt: dict) -> float:
    """Share of layers that compute the indexer: `indexer_types` entries equal to the full marker (1.0 if absent)."""
    kinds = cfg.get(dflt["indexer_types_key"]) or []
    return kinds.count(dflt["full_indexer"]) / len(kinds) if kinds else 1.0


def _base(est, where: dict, dflt: dict, cfg: dict, model: str, op_name: str, kernel: str, chunk: int, batch: int,
          prefix: int) -> float:
    """The bf16-KV dsa_context_module row of one lane (full or skip-indexer) at the per-card chunk."""
    f = {"op_name": op_name, "kernel_source": kernel, "model": model, "kv_cache_dtype": dflt["base_kv_dtype"],
         "num_heads": cfg["num_attention_heads"], "tp_size": 1}
    return _at(_grid(est, **where, table="dsa_context_module_perf", filters=f), "dsa_context_module_perf", chunk, batch, prefix)


def prefill_dsa(est, model: str, system: str, backend: str, version: str, *, isl: int, cp: int, batch: int = 1,
                prefix: int = 0, moe_tp: int | None = None, moe_ep: int = 1, dense_first_k: bool = False,
                config: ModelConfig | None = None) -> dict:
    """Breakdown (ms per layer and totals) of one DSA prefill; moe_tp defaults to cp (tp = dp = 1). The model's
    HF config is `config` when given (`--model-config`), else the named model's."""
    if model not in _lanes()["models"]:
        raise EstimatorError(f"{DSA_YAML.name}: no DSA lane for model {model!r}; known: {', '.join(_lanes()['models'])}")
    lane, dflt, cfg = _lanes()["models"][model], _lanes()["defaults"], (config or model_config(model)).config
    moe_tp = cp // moe_ep if moe_tp is None else moe_tp
    if moe_tp * moe_ep != cp:
        raise EstimatorError(f"moe_tp·moe_ep must equal cp (tp = attention_dp = 1): {moe_tp}·{moe_ep} != {cp}")
    where = dict(system=system, backend=backend, version=version)
    chunk, tokens, h = math.ceil(isl / cp), batch * isl, cfg["hidden_size"]
    short = chunk + prefix <= cfg[dflt["dense_limit_key"]]
    kernel = dflt["dense_kernel"] if short else dflt["base_kernel"]
    base = _base(est, where, dflt, cfg, lane["base_model"], dflt["full_op_name"], kernel, chunk, batch, prefix)
    mqa_g = _grid(est, **where, table="glm5_mqa_logits_module_perf", filters={"model": lane["sparse_model"]})
    mqa = _at(mqa_g, "glm5_mqa_logits", isl, batch, prefix) / cp - _at(mqa_g, "glm5_mqa_logits", chunk, batch, prefix)
    top = {m: _grid(est, **where, table="glm5_topk_module_perf", filters={"model": lane["sparse_model"], "score_mode": m})
           for m in ("top_last", "flat")}
    topk = _at(top["top_last"], "glm5_topk", isl, batch, prefix) / cp - _at(top["flat"], "glm5_topk", chunk, batch, prefix)
    latent = sum(cfg[k] for k in dflt["latent_keys"])
    index_dim = cfg[dflt["index_head_dim_key"]]
    ag_index = _op(est, "comm", system=system, op="all_gather", quant="half", num_gpus=cp, elements=tokens * index_dim)
    ag_latent = _op(est, "comm", system=system, op="all_gather", quant="half", num_gpus=cp, elements=tokens * latent)
    full = base + mqa + topk + ag_index + ag_latent
    w = full_fraction(cfg, dflt)
    skip_parts = {}
    if w < 1.0:
        skip_kernel = dflt["dense_kernel"] if short else dflt["skip_base_kernel"]
        skip_base = _base(est, where, dflt, cfg, lane["skip_model"], dflt["skip_op_name"], skip_kernel, chunk, batch, prefix)
        skip_parts = {"dsa_skip_base": skip_base, "dsa_skip": skip_base + ag_latent, "dsa_full": full}
    dsa = w * full + (1.0 - w) * skip_parts["dsa_skip"] if skip_parts else full
    moe = _op(est, "moe", **where, quant=lane["moe_quant"], distribution=dflt["distribution"], gated=True,
              topk=cfg["num_experts_per_tok"], experts=cfg["n_routed_experts"], hidden=h, inter=cfg["moe_intermediate_size"],
              tp=moe_tp, ep=moe_ep, tokens=tokens)
    group = moe_tp * moe_ep
    pair = ("alltoall", "alltoall") if moe_ep > 1 else ("all_gather", "reduce_scatter")
    comm = sum(_op(est, "comm", system=system, op=op, quant="half", num_gpus=group, elements=tokens * h) for op in pair)
    layers, k = cfg["num_hidden_layers"], cfg.get("first_k_dense_replace", 0)
    moe_layer = dsa + moe + comm
    per_layer = {"dsa_base": base, "dsa_mqa_delta": mqa, "dsa_topk_delta": topk, "dsa_allgather_index": ag_index,
                 "dsa_allgather_latent": ag_latent, **skip_parts, "dsa": dsa, "moe": moe, "comm": comm, "layer": moe_layer}
    out = {"base_kernel": kernel, "per_layer": per_layer,
           "full_layer_fraction": w, "num_layers": layers, "prefill_ms": moe_layer * layers}
    if dense_first_k:
        inter = cfg["intermediate_size"] // moe_tp
        gemm = dict(**where, quant=lane["gemm_quant"], m=tokens)
        dense = _op(est, "gemm", **gemm, n=2 * inter, k=h) + _op(est, "gemm", **gemm, n=h, k=inter)
        out["per_layer"]["dense_mlp"] = dense
        out["first_k_dense"] = k
        out["prefill_dense_first_k_ms"] = k * (dsa + dense + comm) + (layers - k) * moe_layer
    return out
