"""DSA *module* ops (GLM-5 sparse attention): the whole attention block as one measured op.

`dsa_context_module` is a Grid [heads][prefix step][isl][batch] over dsa_context_module_perf, raw (no
sqrt axis); `dsa_generation_module` a Grid [heads][batch][s = kv step + 1] over dsa_generation_module_perf
(the log-space transfer distances are taken in s, as 0.12.0's). Architectures other than those with a
roofline geometry in dsa.yaml (GLM's only) raise naming it. A slice is the model architecture × KV
dtype × the block's GEMM quant, and every kernel lane of that KV dtype together (sparse indexer rows
and the dense ragged rows of short chunks); a coordinate repeated within a file takes its last row —
as 0.12.0 reads them (probed).
Skip-indexer layers (GLM-5.2 shared top-k index) are the `*_skip_indexer` rows; a query's `full_frac`
(fraction of layers that run the indexer) blends full·f + skip·(1 − f), as 0.12.0 amortises them; a
table without any skip-indexer rows prices every layer full (0.12.0 takes no skip path there).
A missing bracket branch is rescaled and an out-of-grid query borrows util from the nearest leaves with
the DSA module roofline (ops/dsa/roofline.py), as the attention Grid does. There is no EMPIRICAL here.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import polars as pl
import yaml

from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError, UnknownQuantError
from perfledger.estimator.fit.grid import evaluate, power_grid, rows_grid
from perfledger.estimator.ops.base import OpModel, Queries
from perfledger.estimator.ops.dsa.roofline import dsa_module_sol


@cache
def _config() -> dict:
    return yaml.safe_load(Path(__file__).with_name("dsa.yaml").read_text())


def _lanes() -> dict:
    return _config()["module"]


def _bytes(quant: str) -> float:
    sizes = _config()["roofline_quants"]["bytes"]
    if quant not in sizes:
        raise UnknownQuantError(f"DSA module quant {quant!r} not priced (dsa.yaml roofline_quants bytes: {', '.join(sizes)})")
    return float(sizes[quant])


class _DsaModule(OpModel):
    phase = ""
    lanes = "module"  # dsa.yaml section naming the op_name rows per phase
    axes: tuple[str, ...] = ()
    defaults = {"architecture": "GlmMoeDsaForCausalLM", "full_frac": 1.0}

    def _roofline(self, est, key, indexer: str = "full"):
        """SOL(heads, batch, new tokens, prefix) in ms for this slice's quants (skip rows: no indexer work).

        A system without fp8 tensor cores (a100 / a30) is refused, typed, at any quant: 0.12.0's DSA module SOL
        needs `fp8_tc_flops` (the indexer's rate) in context and decode alike, even when the indexer does not run.
        """
        spec, flops = est.spec(key["system"]), _config()["roofline_quants"]["flops_dtype"]
        kw = dict(decode=self.phase == "generation", skip_indexer=indexer == "skip",
                  gemm_bytes=_bytes(key["gemm_quant"]), kv_bytes=_bytes(key["kv_quant"]),
                  gemm_flops=spec.tc_flops(flops.get(key["gemm_quant"], "bfloat16")),
                  bf16_flops=spec.tc_flops("bfloat16"), fp8_flops=spec.tc_flops("fp8"), bw=spec.mem_bw)
        return lambda h, b, n, p: dsa_module_sol(key["architecture"], h, b, n, p, **kw)[0]

    def sol(self, est, key, q):
        c = {k: np.asarray(v) for k, v in self._grid_coords(q).items()}
        return self._roofline(est, key)(c["num_heads"], c["batch_size"], *self._tokens(c))

    def empirical(self, est, key, q, shared=False):
        raise EmpiricalUnavailableError(f"{self.name}: 0.12.0 has no EMPIRICAL estimate for the DSA module")

    def _slice(self, est, key, indexer: str) -> pl.DataFrame:
        """The slice's rows of one indexer lane, a repeated coordinate's last row first (0.12.0 overwrites)."""
        lane = _config()[self.lanes][self.phase]
        filters = {"architecture": key["architecture"], "op_name": lane[indexer], "kv_cache_dtype": key["kv_quant"],
                   "gemm_type": key["gemm_quant"]}

        def build():
            rows = est.table(key["system"], key["backend"], key["version"], self.table, shared=True, dedupe=False)
            rows = rows.filter(*[pl.col(c) == v for c, v in filters.items()])
            if not rows.height:
                where = ", ".join(f"{c}={v}" for c, v in filters.items())
                raise NoDataError(f"no {self.table} rows for {key['system']}/{key['backend']}/{key['version']} with {where}")
            # sources in priority order, within one the last row of a coordinate first
            return self._axis_rows(rows.with_row_index("_row").sort("_source_rank", "_row", descending=[False, True]))

        return est.memo(("dsa_module_rows", self.name, indexer, *(key[k] for k in self.group_keys)), build)

    def _grid(self, est, key, indexer: str):
        def build():
            sol = self._roofline(est, key, indexer)
            return rows_grid(self._slice(est, key, indexer), self.axes,
                             lambda c: float(sol(c["num_heads"], c["batch_size"], *self._tokens(c))))

        return est.memo(("dsa_module", self.name, indexer, *(key[k] for k in self.group_keys)), build)

    def _power_grid(self, est, key, indexer: str):
        return est.memo(("dsa_module_power", self.name, indexer, *(key[k] for k in self.group_keys)),
                        lambda: power_grid(self._slice(est, key, indexer), self.axes))

    def _has_skip_rows(self, est, key) -> bool:
        """0.12.0 blends only where the table holds skip-indexer rows at all; without any it prices every layer full."""
        import polars as pl

        lane = _lanes()[self.phase]
        rows = est.table(key["system"], key["backend"], key["version"], self.table, shared=True)
        return bool(rows.filter(pl.col("op_name") == lane["skip"]).height)

    def _grid_coords(self, q) -> dict:
        """Grid axis name -> query column (arrays)."""
        raise NotImplementedError

    def _tokens(self, c: dict) -> tuple:
        """(new tokens, prefix) at Grid coordinates."""
        raise NotImplementedError

    def _axis_rows(self, rows):
        """The slice's rows with the Grid's axis columns."""
        return rows

    def _parts(self, est, key) -> list[tuple[float, str]]:
        """(weight, indexer lane) of the layer blend: full·f + skip·(1 − f) where the table holds skip rows."""
        frac = float(key["full_frac"])
        if not 0.0 <= frac <= 1.0:
            raise ValueError(f"{self.name}: full_frac={frac} must lie in [0, 1]")
        if frac < 1.0 and self._has_skip_rows(est, key):
            return [(frac, "full"), (1.0 - frac, "skip")]
        return [(1.0, "full")]

    def _values(self, q, grid) -> np.ndarray:
        """One Grid's value at each query (NaN where it misses), built once per slice: latency and energy share it."""
        def build():
            cols = self._grid_coords(q)
            out = np.full(q.height, np.nan)
            for i in range(q.height):
                value = evaluate(grid, {a: int(v[i]) for a, v in cols.items()})[0]
                if value is not None:
                    out[i] = value
            return out

        return q.memo(("dsa_grid_values", id(grid)), build) if isinstance(q, Queries) else build()

    def silicon(self, est, key, q):
        """Σ weight · lane latency over the layer blend; NaN (a miss) where any lane misses."""
        out = np.zeros(q.height)
        for weight, lane in self._parts(est, key):
            out = out + weight * self._values(q, self._grid(est, key, lane))
        return out, np.isnan(out)

    def energy(self, est, key, q, latency):
        """Σ weight · lane latency · lane power (each lane's measured power Grid; the skip-lane blend is not probed:
        no table with power holds skip rows)."""
        parts = [(w, self._grid(est, key, lane), self._power_grid(est, key, lane)) for w, lane in self._parts(est, key)]
        if any(power is None for _, _, power in parts):
            return None
        out = np.zeros(q.height)
        for weight, grid, power in parts:
            out = out + weight * (self._values(q, grid) * self._values(q, power))
        return out


class DsaContextModuleModel(_DsaModule):
    name = "dsa_context_module"
    tables = ("dsa_context_module_perf",)
    phase = "context"
    group_keys = ("system", "backend", "version", "architecture", "kv_quant", "gemm_quant", "full_frac")
    value_columns = ("heads", "isl", "batch", "prefix")
    defaults = {**_DsaModule.defaults, "prefix": 0}
    axes = ("num_heads", "step", "isl", "batch_size")  # 0.12.0 nests the prefix above isl (probed)

    def _grid_coords(self, q):
        return {"num_heads": q["heads"], "isl": q["isl"], "batch_size": q["batch"], "step": q["prefix"]}

    def _tokens(self, c):
        return c["isl"], c["step"]


class DsaGenerationModuleModel(_DsaModule):
    name = "dsa_generation_module"
    tables = ("dsa_generation_module_perf",)
    phase = "generation"
    group_keys = ("system", "backend", "version", "architecture", "kv_quant", "gemm_quant", "full_frac")
    value_columns = ("heads", "batch", "seq")
    axes = ("num_heads", "batch_size", "seq")

    def _axis_rows(self, rows):
        return rows.with_columns((pl.col("step") + 1).alias("seq"))

    def _grid_coords(self, q):
        return {"num_heads": q["heads"], "batch_size": q["batch"], "seq": q["seq"]}

    def _tokens(self, c):
        return 1, np.asarray(c["seq"]) - 1
