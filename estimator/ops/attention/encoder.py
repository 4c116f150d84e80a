"""Encoder (vision / audio) attention: a Grid over [num_heads][isl][batch] per (fmha quant, head_dim).

The bidirectional ViT kernel: no KV cache, MHA only, no window, bf16 only (0.12.0 refuses other fmha quants). isl is
one sequence's length (a ViT image's patches), batch the sequences. SILICON follows the context-attention Grid
rules (sqrt-latency along isl, ragged SOL rescale, nearest-leaf util transfer outside the data) over the slice's
rows; an uncollected head_dim is a miss. EMPIRICAL is SOL / util from a UtilGrid over the own version's rows of the
query's head_dim: 0.12.0 borrows no other head_dim or version, so a head_dim without own rows has no fallback.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError, UnknownQuantError
from perfledger.estimator.fit.grid import evaluate_many, power_grid, rows_grid, table_slice
from perfledger.estimator.fit.roofline import encoder_attention_sol
from perfledger.estimator.fit.util_grid import build_util_grid, query_util
from perfledger.estimator.ops.base import OpModel

AXES = ("num_heads", "isl", "batch_size")
FMHA_QUANTS = ("bfloat16",)  # the only fmha quant 0.12.0's EncoderAttention accepts


class EncoderAttentionModel(OpModel):
    name = "encoder_attention"
    group_keys = ("system", "backend", "version", "fmha_quant", "head_dim")
    value_columns = ("heads", "isl", "batch")
    defaults = {"fmha_quant": "bfloat16"}  # a ViT runs bf16 whatever the language model's quant
    tables = ("encoder_attention_perf",)

    def _sol_fn(self, est, key):
        if key["fmha_quant"] not in FMHA_QUANTS:
            raise UnknownQuantError(f"encoder attention fmha quant {key['fmha_quant']!r} not priced "
                                    f"(known: {', '.join(FMHA_QUANTS)})")
        spec = est.spec(key["system"])
        flops, hd = spec.tc_flops(key["fmha_quant"]), int(key["head_dim"])
        return lambda heads, isl, batch: encoder_attention_sol(batch, isl, heads, hd, flops, spec.mem_bw)[0]

    def sol(self, est, key, q):
        return self._sol_fn(est, key)(q["heads"], q["isl"], q["batch"])

    def _rows(self, est, key, shared: bool) -> pl.DataFrame:
        filters = {"attn_dtype": key["fmha_quant"], "head_dim": int(key["head_dim"])}
        return table_slice(est, key["system"], key["backend"], key["version"], self.table, filters, shared=shared)

    def _coords(self, q) -> dict:
        return {"num_heads": np.asarray(q["heads"], dtype=np.int64), "isl": np.asarray(q["isl"], dtype=np.int64),
                "batch_size": np.asarray(q["batch"], dtype=np.int64)}

    def _grid(self, est, key):
        sol = self._sol_fn(est, key)

        def build():
            return rows_grid(self._rows(est, key, True), AXES, lambda c: float(sol(c["num_heads"], c["isl"], c["batch_size"])),
                             sqrt_axes=("isl",))

        return est.memo(("encoder_grid", *(key[c] for c in self.group_keys)), build)

    def silicon(self, est, key, q):
        sol = self._sol_fn(est, key)
        values, _ = evaluate_many(self._grid(est, key), self._coords(q),
                                  lambda c: sol(c["num_heads"], c["isl"], c["batch_size"]))
        return values, np.isnan(values)

    def energy(self, est, key, q, latency):
        """The slice's measured power, Grid-blended over [heads, isl, batch] (`fit/grid.power_grid`), × latency."""
        grid = est.memo(("encoder_power", *(key[c] for c in self.group_keys)),
                        lambda: power_grid(self._rows(est, key, True), AXES))
        if grid is None:
            return None
        power, _ = evaluate_many(grid, self._coords(q), lambda c: np.ones(len(c["isl"])))
        return power * latency

    def empirical(self, est, key, q, shared: bool = False):
        """SOL / util from the own version's rows (sorted along the axes, as 0.12.0 walks its nested table)."""
        sol = self._sol_fn(est, key)

        def build():
            try:
                rows = self._rows(est, key, False).sort(list(AXES), maintain_order=True)
            except NoDataError:
                return None
            coords = rows.select(AXES).to_numpy().astype(np.float64)
            return build_util_grid(coords, sol(*coords.T) / rows["latency"].to_numpy())

        grid = est.memo(("encoder_util", *(key[c] for c in self.group_keys)), build)
        if grid is None:
            where = "/".join(str(key[c]) for c in self.group_keys)
            raise EmpiricalUnavailableError(f"{self.name}: no own-version samples for {where} (no head_dim is borrowed)")
        coords = np.column_stack([np.asarray(q[c], dtype=np.float64) for c in self.value_columns])
        return sol(*coords.T) / query_util(grid, coords), "empirical"
