"""MLA (DeepSeek latent attention) ops: context, generation and the decode pre/post BMMs.

Context and generation are Grids over their own tables (context: [heads][isl][batch], sqrt-latency
along isl; generation: [heads][batch][kv step + 1] at the single step s − 1, raw): inside the data they
interpolate, outside it they borrow util from the nearest measured leaves, as the attention Grid does.
The BMM is a 1-D token curve per head count (lerp inside, SOL ratio outside); a head count between
collected ones takes the next one up, scaled by SOL. EMPIRICAL is a UtilGrid over the slice's own
samples (BMM: one head count's tokens); 0.12.0 has no transfer ladder here. No SOL clamp at load (the
reference clamps none of the MLA tables). Geometry and byte sizes come from mla.yaml; rooflines from fit/roofline.py.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import polars as pl
import yaml

from perfledger.estimator.fit.curve import eval_curve
from perfledger.estimator.fit.grid import evaluate, power_grid, rows_grid, table_slice
from perfledger.estimator.fit.roofline import context_mla_sol, generation_mla_sol, mla_bmm_sol
from perfledger.estimator.fit.util_grid import build_util_grid, query_util
from perfledger.estimator.ops.base import OpModel


@cache
def dims() -> dict:
    return yaml.safe_load(Path(__file__).with_name("mla.yaml").read_text())


def _bytes(table: str, quant: str) -> float:
    sizes = dims()[table]
    if quant not in sizes:
        from perfledger.estimator.errors import UnknownQuantError

        raise UnknownQuantError(f"MLA quant {quant!r} not priced (mla.yaml {table}: {', '.join(sizes)})")
    return float(sizes[quant])


def _flops(est, system: str, quant: str) -> float:
    return est.spec(system).tc_flops(dims()["flops_dtype"].get(quant, "bfloat16"))


class _GridModel(OpModel):
    """Shared silicon loop: one Grid per slice, evaluated query by query (misses are NaN)."""

    axes: tuple[str, ...] = ()  # the table's Grid axes, one per value column, in the same order
    sqrt_axes: tuple[str, ...] = ()

    def _sol(self, est, key):
        """The slice's roofline as a function of the value columns (in `value_columns` order)."""
        raise NotImplementedError

    def sol(self, est, key, q):
        return self._sol(est, key)(*(q[c] for c in self.value_columns))

    def _grid(self, est, key):
        sol = self._sol(est, key)
        return rows_grid(self._rows(est, key), self.axes, lambda c: float(sol(*(c[a] for a in self.axes))),
                         sqrt_axes=self.sqrt_axes)

    def _coords(self, q, i) -> dict:
        return {a: int(q[c][i]) for a, c in zip(self.axes, self.value_columns, strict=True)}

    def _rows(self, est, key, shared: bool) -> pl.DataFrame:
        """The slice's rows (own version only unless shared), in file order."""
        raise NotImplementedError

    def empirical(self, est, key, q, shared: bool = False):
        """SOL / util, util from a UtilGrid over the slice's own samples (no transfer ladder: 0.12.0 has none here)."""
        from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError

        def build():
            try:
                rows = self._rows(est, key, shared)
            except NoDataError:
                return None
            coords = rows.select(self.axes).to_numpy().astype(np.float64)
            return build_util_grid(coords, self._sol_at(est, key, coords) / rows["latency"].to_numpy())

        grid = est.memo(("mla_util", self.name, shared, *(key[c] for c in self.group_keys)), build)
        if grid is None:
            group = "/".join(str(key[c]) for c in self.group_keys)
            raise EmpiricalUnavailableError(f"{self.name}: no own-version samples for {group}")
        coords = np.column_stack([np.asarray(q[c], dtype=np.float64) for c in self.value_columns])
        return self._sol_at(est, key, coords) / query_util(grid, coords), "empirical"

    def _sol_at(self, est, key, coords: np.ndarray) -> np.ndarray:
        """SOL at coordinate rows ordered like `axes` / `value_columns`."""
        return np.asarray(self._sol(est, key)(*coords.T), dtype=np.float64)

    def silicon(self, est, key, q):
        grid = est.memo((self.name, *(key[c] for c in self.group_keys)), lambda: self._grid(est, key))
        out = np.array([np.nan if (v := evaluate(grid, self._coords(q, i))[0]) is None else v for i in range(q.height)])
        return out, np.isnan(out)

    def energy(self, est, key, q, latency):
        """The slice's measured power on the same Grid axes (`fit/grid.power_grid`) × latency."""
        grid = est.memo((self.name, "power", *(key[c] for c in self.group_keys)),
                        lambda: power_grid(self._rows(est, key), self.axes))
        if grid is None:
            return None
        power = np.array([np.nan if (v := evaluate(grid, self._coords(q, i))[0]) is None else v for i in range(q.height)])
        return power * latency


class ContextMlaModel(_GridModel):
    name = "context_mla"
    tables = ("context_mla_perf",)
    group_keys = ("system", "backend", "version", "fmha_quant", "kv_quant")
    value_columns = ("heads", "isl", "batch")
    axes = ("num_heads", "isl", "batch_size")
    sqrt_axes = ("isl",)

    def _sol(self, est, key):
        spec, kv = est.spec(key["system"]), _bytes("kv_bytes", key["kv_quant"])
        flops = _flops(est, key["system"], key["fmha_quant"])
        return lambda h, s, b: context_mla_sol(b, s, h, kv, dims(), flops, spec.mem_bw)[0]

    def _rows(self, est, key, shared=True):
        return table_slice(est, key["system"], key["backend"], key["version"], self.table,
                           {"mla_dtype": key["fmha_quant"], "kv_cache_dtype": key["kv_quant"]}, shared=shared)


class GenerationMlaModel(_GridModel):
    name = "generation_mla"
    tables = ("generation_mla_perf",)
    group_keys = ("system", "backend", "version", "kv_quant")
    value_columns = ("heads", "batch", "seq")
    axes = ("num_heads", "batch_size", "seq")

    def _sol(self, est, key):
        spec, kv = est.spec(key["system"]), _bytes("kv_bytes", key["kv_quant"])
        flops = _flops(est, key["system"], key["kv_quant"])
        return lambda h, b, s: generation_mla_sol(b, s, h, kv, dims(), flops, spec.mem_bw)[0]

    def _rows(self, est, key, shared=True):
        rows = table_slice(est, key["system"], key["backend"], key["version"], self.table,
                           {"kv_cache_dtype": key["kv_quant"]}, shared=shared)
        return rows.with_columns((pl.col("step") + 1).alias("seq"))


class MlaBmmModel(_GridModel):
    name = "mla_bmm"
    tables = ("mla_bmm_perf",)
    group_keys = ("system", "backend", "version", "quant", "phase")
    value_columns = ("heads", "tokens")

    def _sol(self, est, key):
        spec, mem = est.spec(key["system"]), _bytes("bmm_bytes", key["quant"])
        flops = _flops(est, key["system"], key["quant"])
        return lambda h, t: mla_bmm_sol(t, h, mem, dims(), flops, spec.mem_bw)[0]

    energy = OpModel.energy  # its token curves hold no power in any table

    def _bmm_rows(self, est, key, shared: bool = True) -> tuple[str, pl.DataFrame]:
        """(quant read, rows) for this phase; a quant without rows of its own may read its mla.yaml fallback."""
        from perfledger.estimator.errors import NoDataError

        names = dims()["bmm_op_names"]
        if key["phase"] not in names:
            raise ValueError(f"mla_bmm phase {key['phase']!r}: expected one of {', '.join(names)}")
        where = (key["system"], key["backend"], key["version"], self.table)
        quant = key["quant"]
        try:
            return quant, table_slice(est, *where, {"op_name": names[key["phase"]], "bmm_dtype": quant}, shared=shared)
        except NoDataError:
            quant = dims()["bmm_quant_fallback"].get(quant)
            if quant is None:
                raise
            return quant, table_slice(est, *where, {"op_name": names[key["phase"]], "bmm_dtype": quant}, shared=shared)

    def _curves(self, est, key) -> tuple[str, dict]:
        """(quant read, heads -> (tokens, latency) curve)."""
        def build():
            quant, rows = self._bmm_rows(est, key)
            rows = rows.sort("num_heads", "num_tokens")
            return quant, {int(h): (g["num_tokens"].to_numpy(), g["latency"].to_numpy())
                           for (h,), g in rows.group_by("num_heads", maintain_order=True)}

        return est.memo((self.name, *(key[c] for c in self.group_keys)), build)

    def silicon(self, est, key, q):
        """Tokens: the AxisCurve rule; heads: the next collected count up, scaled by SOL (none above: miss)."""
        quant, curves = self._curves(est, key)
        sol = self._sol(est, {**key, "quant": quant})
        heads = np.array(sorted(curves))
        out = np.full(q.height, np.nan)
        for i, (h, t) in enumerate(zip(q["heads"], q["tokens"], strict=True)):
            j = int(np.searchsorted(heads, h, side="left"))
            if j == len(heads):
                continue
            snap = int(heads[j])
            xs, lats = curves[snap]
            value, _ = eval_curve(xs, lats, np.array([t]), lambda x, snap=snap: sol(snap, x))
            out[i] = value[0] * sol(h, t) / sol(snap, t)
        return out, np.isnan(out)

    def empirical(self, est, key, q, shared: bool = False):
        """SOL / util over one head count's token samples: the query's count, else the next one up (none above)."""
        from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError

        try:
            quant, rows = self._bmm_rows(est, key, shared)
        except NoDataError as exc:
            raise EmpiricalUnavailableError(f"mla_bmm: {exc}") from exc
        sol = self._sol(est, {**key, "quant": quant})
        out = np.empty(q.height)
        counts = np.unique(rows["num_heads"].to_numpy())
        for h in np.unique(q["heads"]):
            j = int(np.searchsorted(counts, h, side="left"))
            if j == len(counts):
                raise EmpiricalUnavailableError(f"mla_bmm: heads={h} above every collected count for "
                                                f"{'/'.join(str(key[c]) for c in self.group_keys)}")
            own = rows.filter(pl.col("num_heads") == int(counts[j]))
            tokens = own["num_tokens"].to_numpy().astype(np.float64)
            grid = build_util_grid(tokens[:, None], sol(counts[j], tokens) / own["latency"].to_numpy())
            at = q["heads"] == h
            x = np.asarray(q["tokens"][at], dtype=np.float64)
            out[at] = sol(h, x) / query_util(grid, x[:, None])
        return out, "empirical"
