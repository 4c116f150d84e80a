"""DeepSeek-V4 compressed-attention module ops (CSA / HCA): the whole attention block as one measured op.

A slice is the attention kind (csa: compress ratio 4, hca: 128 — SWA layers price as hca) × FMHA / KV / GEMM
quant × the model's native head count (num_heads · tp_size of the rows) × its rank-local head count, each resolved
against the collected counts: exact, else the only one, else the nearest below, else the smallest.
`dsv4_context_module` is a raw Grid [prefix][isl][batch], `dsv4_generation_module` a raw Grid [batch][s]
(s = isl + step: the kv length + 1); out-of-grid queries borrow util with the module roofline (roofline.py)
at the model's own geometry. CSA rows have the top-k DELTA (topk.py) subtracted, clamped at 0. EMPIRICAL is
SOL / util from a UtilGrid over the slice's own samples. The collectors' dtype names map by dsv4.yaml.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import polars as pl
import yaml

from perfledger.estimator.errors import NoDataError, UnknownQuantError
from perfledger.estimator.ops.dsv4 import topk
from perfledger.estimator.ops.dsv4.roofline import attention_sol
from perfledger.estimator.ops.mla.kernels import _GridModel

GEOMETRY = ("hidden", "q_lora", "o_lora", "head_dim", "rope_dim", "index_heads", "index_head_dim", "index_topk",
            "window", "o_groups")


@cache
def config() -> dict:
    return yaml.safe_load(Path(__file__).with_name("dsv4.yaml").read_text())


def _lookup(table: str, quant: str):
    values = config()[table]
    if quant not in values:
        raise UnknownQuantError(f"DeepSeek-V4 quant {quant!r} not priced (dsv4.yaml {table}: {', '.join(values)})")
    return values[quant]


def resolve_heads(available, want: int) -> int | None:
    """0.12.0's head-key rule: exact, else the only key, else the nearest key below, else the smallest."""
    keys = sorted({int(k) for k in available})
    if not keys:
        return None
    if want in keys or len(keys) == 1:
        return want if want in keys else keys[0]
    below = [k for k in keys if k <= want]
    return below[-1] if below else keys[0]


class _Dsv4Module(_GridModel):
    phase = ""
    group_keys = ("system", "backend", "version", "kind", "fmha_quant", "kv_quant", "gemm_quant", "native_heads",
                  "heads", *GEOMETRY)
    defaults = {"fmha_quant": "bfloat16"}

    def _ratio(self, key) -> int:
        kinds = config()["kinds"]
        if key["kind"] not in kinds:
            raise ValueError(f"{self.name}: kind {key['kind']!r}; expected one of {', '.join(kinds)}")
        return int(kinds[key["kind"]]["compress_ratio"])

    def _roofline(self, est, key):
        """SOL(b, s, prefix) in ms at this slice's geometry and quants."""
        spec = est.spec(key["system"])
        fmha = key["fmha_quant"] if self.phase == "context" else _lookup("decode_fmha", key["kv_quant"])
        rates = {"gemm": spec.tc_flops(_lookup("flops_dtype", key["gemm_quant"])), "bf16": spec.tc_flops("bfloat16"),
                 "fp8": spec.tc_flops("fp8"), "fmha": spec.tc_flops(_lookup("flops_dtype", fmha))}
        sizes = {"gemm": _lookup("bytes", key["gemm_quant"]), "bf16": 2.0, "kv": _lookup("bytes", key["kv_quant"]),
                 "fmha": _lookup("bytes", fmha)}
        g = {**{k: int(key[k]) for k in ("heads", *GEOMETRY)}, "index_cache_per_dim": config()["indexer_cache_bytes_per_dim"]}
        ratio, context = self._ratio(key), self.phase == "context"
        return lambda b, s, p: attention_sol(g, context=context, b=b, s=s, prefix=p, ratio=ratio, rates=rates,
                                             sizes=sizes, bw=spec.mem_bw)[0]

    def _rows(self, est, key, shared: bool = True) -> pl.DataFrame:
        """The slice's rows at the resolved local head count, file order (own version only unless shared)."""
        aliases = config()["dtype_aliases"]
        norm = lambda c: pl.col(c).replace(aliases)  # noqa: E731
        table = config()["kinds"][key["kind"]][self.phase]
        rows = est.table(key["system"], key["backend"], key["version"], table, shared=shared)
        rows = rows.filter(norm("mla_dtype") == key["fmha_quant"], norm("kv_cache_dtype") == key["kv_quant"],
                           pl.col("gemm_type") == key["gemm_quant"], pl.col("compress_ratio") == self._ratio(key))
        rows = rows.with_columns((pl.col("num_heads") * pl.col("tp_size")).alias("native_heads"))
        native = resolve_heads(rows["native_heads"].unique().to_list(), int(key["native_heads"]))
        rows = rows.filter(pl.col("native_heads") == (-1 if native is None else native))
        local = resolve_heads(rows["num_heads"].unique().to_list(), int(key["heads"]))
        if local is None:
            raise NoDataError(f"no {table} rows for {key['system']}/{key['backend']}/{key['version']} with "
                              f"native heads {key['native_heads']}, fmha {key['fmha_quant']}, kv {key['kv_quant']}, "
                              f"gemm {key['gemm_quant']}")
        return self._axis_rows(rows.filter(pl.col("num_heads") == local))

    def _axis_rows(self, rows: pl.DataFrame) -> pl.DataFrame:
        return rows

    def _delta(self, est, key, q) -> np.ndarray:
        """The CSA top-k DELTA per query (0 for HCA or without calibration)."""
        if key["kind"] != "csa":
            return np.zeros(q.height)
        table = topk.deltas(est, key["system"], key["backend"], key["version"], int(key["native_heads"]),
                            config()["topk_variant"][self.phase])
        return np.array([topk.delta_ms(table, *shape) for shape in self._topk_shapes(q)])

    def _topk_shapes(self, q):
        """(prefix, isl, batch) of each query as the calibration keys them."""
        raise NotImplementedError

    def silicon(self, est, key, q):
        out, miss = super().silicon(est, key, q)
        return np.maximum(0.0, out - self._delta(est, key, q)), miss


class Dsv4ContextModuleModel(_Dsv4Module):
    name = "dsv4_context_module"
    tables = ("dsv4_csa_context_module_perf", "dsv4_hca_context_module_perf", topk.TABLE)
    phase = "context"
    value_columns = ("prefix", "isl", "batch")
    axes = ("step", "isl", "batch_size")
    defaults = {**_Dsv4Module.defaults, "prefix": 0}

    def _sol(self, est, key):
        roof = self._roofline(est, key)
        return lambda p, s, b: roof(b, s, p)

    def _topk_shapes(self, q):
        return zip(q["prefix"].astype(int), q["isl"].astype(int), q["batch"].astype(int), strict=True)


class Dsv4GenerationModuleModel(_Dsv4Module):
    name = "dsv4_generation_module"
    tables = ("dsv4_csa_generation_module_perf", "dsv4_hca_generation_module_perf", topk.TABLE)
    phase = "generation"
    value_columns = ("batch", "seq")
    axes = ("batch_size", "seq")

    def _axis_rows(self, rows):
        return rows.with_columns((pl.col("isl") + pl.col("step")).alias("seq"))

    def _sol(self, est, key):
        roof = self._roofline(est, key)
        return lambda b, s: roof(b, s, 0)

    def _topk_shapes(self, q):
        return ((max(int(s) - 1, 0), 1, int(b)) for b, s in zip(q["batch"], q["seq"], strict=True))
