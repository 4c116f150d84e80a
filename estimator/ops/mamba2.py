"""Mamba-2 kernels (mamba2_perf: causal conv1d and the SSM scan, prefill and decode), as 0.12.0 prices them.

The tables are keyed by the model's structure (d_model, d_state, d_conv, nheads, head_dim, n_groups, chunk_size),
then [batch][seq]. Found by probing 0.12.0 (docs/estimator.md): a query reads the rows of its exact structure, else
the first structure collected at its d_model (table order, unscaled, still tier silicon); a d_model without rows,
a kernel without rows (the SSM scan has none anywhere) and every decode kernel (mamba2.yaml `grid_phases`) answer
the mamba2.yaml roofline (tier sol). Context rows are a [batch][seq] Grid (`grid.py`: exact, bilinear, ragged SOL
rescale, 4-leaf util transfer outside). The database mode changes none of this in 0.12.0, so every mode
answers alike, SOL included (its static engine in SOL mode reads the conv rows too; probed on rtx_pro_6000 / h200
trtllm). Rows come from the own backend and earlier versions only.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import polars as pl
import yaml

from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError
from perfledger.estimator.fit.grid import evaluate, rows_grid
from perfledger.estimator.fit.roofline import mamba2_sol
from perfledger.estimator.ops.base import MODES, SHARED_MODES, Answer, OpModel, Queries, tier_codes

MAMBA2_YAML = Path(__file__).with_name("mamba2.yaml")
PHASES = ("context", "generation")
STRUCTURE = ("d_state", "d_conv", "nheads", "head_dim", "n_groups", "chunk_size")


@cache
def mamba2_catalog() -> dict:
    """mamba2.yaml: the roofline form per kernel and the phases whose rows are read."""
    return yaml.safe_load(MAMBA2_YAML.read_text())


class Mamba2Model(OpModel):
    name = "mamba2_kernel"
    tables = ("mamba2_perf",)
    group_keys = ("system", "backend", "version", "kernel", "phase", "d_model", *STRUCTURE)
    value_columns = ("batch", "seq")
    defaults = {"seq": 1}

    def sol(self, est, key, q):
        """The kernel's mamba2.yaml roofline over batch × seq tokens (decode: one token per sequence)."""
        form = mamba2_catalog()["forms"].get(key["kernel"])
        if form is None:
            raise EmpiricalUnavailableError(f"mamba2: no roofline for kernel {key['kernel']!r} in {MAMBA2_YAML.name}")
        tokens = q["batch"] * (q["seq"] if key["phase"] == "context" else 1)
        return mamba2_sol(form, tokens, int(key["nheads"]), int(key["head_dim"]), int(key["d_state"]), int(key["d_conv"]),
                          int(key["n_groups"]), est.spec(key["system"]).mem_bw)[0]

    def evaluate(self, est, key, q, mode):
        """The structure's Grid where the phase's rows are read and hold the kernel at this d_model, else the
        roofline labelled sol, in every mode (0.12.0 answers so in every database mode, SOL included)."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        if key["phase"] not in PHASES:
            raise NoDataError(f"mamba2: phase {key['phase']!r} is not priced (have {', '.join(PHASES)})")
        sol = self.sol(est, key, q)
        grid = self._grid(est, key, shared=mode in SHARED_MODES)
        if grid is None:
            return Answer(sol, sol, tier_codes("sol", q.height))
        lat = np.array([evaluate(grid, {"batch": float(b), "seq": float(s)})[0]
                        for b, s in zip(q["batch"], q["seq"], strict=True)], dtype=np.float64)
        if not np.isfinite(lat).all():
            first = int(np.flatnonzero(~np.isfinite(lat))[0])
            raise NoDataError(f"no silicon data can anchor {self.describe(key, q, first)}")
        return Answer(lat, sol, tier_codes("silicon", q.height))

    def _grid(self, est, key, shared: bool):
        """The [batch][seq] Grid of the query's structure (exact, else the first at its d_model), or None where the
        phase's rows are not read or none hold this kernel at this d_model. Earlier versions' rows (`shared`) only in
        SILICON / HYBRID: 0.12.0's EMPIRICAL / SOL database carries the own version's only (rc23 SOL: the roofline)."""
        def build():
            if key["phase"] not in mamba2_catalog()["grid_phases"]:
                return None
            try:
                rows = est.table(key["system"], key["backend"], key["version"], self.table, shared=shared)
            except NoDataError:
                return None
            rows = rows.filter(pl.col("kernel_source") == key["kernel"], pl.col("phase") == key["phase"],
                               pl.col("d_model") == int(key["d_model"]))
            if not rows.height:
                return None
            want = tuple(int(key[c]) for c in STRUCTURE)
            shapes = rows.select(STRUCTURE).unique(maintain_order=True).rows()
            pick = want if want in shapes else shapes[0]
            rows = rows.filter(*(pl.col(c) == v for c, v in zip(STRUCTURE, pick, strict=True)))
            picked = {**key, **dict(zip(STRUCTURE, pick, strict=True))}

            def sol(q: dict) -> float:
                return float(self.sol(est, picked, Queries(batch=np.array([q["batch"]]), seq=np.array([q["seq"]])))[0])

            return rows_grid(rows.rename({"batch_size": "batch", "seq_len": "seq"}), ("batch", "seq"), sol)

        return est.memo(("mamba2_grid", shared, *(key[c] for c in self.group_keys)), build)
