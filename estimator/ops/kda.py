"""KDA (Kimi Delta Attention) kernels from kda_perf, as 0.12.0 prices them.

Rows: own backend (version, donors, earlier versions), then the reuse manifest's cross-backend lenders
(`data/cross_backend.py`). An uncollected head count reads the nearest collected count (ties to the smaller,
unscaled) inside SILICON, as 0.12.0 does; the answer is labelled `xshape`, so the matrix can still tell a kernel
run at the shard from one read off another head count.
Context kernels are a [batch][seq] Grid (`grid.py`: exact, bilinear, ragged SOL rescale, 4-leaf util
transfer outside); decode kernels a batch curve (lerp, edge util outside), both over the kda.yaml roofline.
A kernel without rows at the query's d_model is priced by that roofline (tier `sol`), and a decode kernel
kda.yaml routes through a fused one covering the shard prices that one, as 0.12.0 does inside SILICON (all
found by probing it; docs/estimator.md).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import polars as pl
import yaml

from perfledger.estimator.errors import NoDataError
from perfledger.estimator.fit.curve import eval_curve
from perfledger.estimator.fit.grid import evaluate, rows_grid
from perfledger.estimator.fit.roofline import kda_sol
from perfledger.estimator.ops.base import MODES, SHARED_MODES, Answer, OpModel, Queries, tier_codes

PHASES = ("context", "generation")
KDA_YAML = Path(__file__).with_name("kda.yaml")


@cache
def kda_catalog() -> dict:
    """kda.yaml: roofline forms per (phase, kernel) and the scan chunk length."""
    return yaml.safe_load(KDA_YAML.read_text())


class KdaModel(OpModel):
    name = "kda_kernel"
    tables = ("kda_perf",)
    group_keys = ("system", "backend", "version", "kernel", "phase", "heads", "head_dim", "d_model", "d_conv")
    value_columns = ("batch", "seq")
    defaults = {"head_dim": 128, "d_model": 7168, "d_conv": 4, "seq": 1}

    def sol(self, est, key, q):
        """The kda.yaml roofline (NaN for a (phase, kernel) pair without one); decode kernels at seq 1."""
        cat = kda_catalog()
        forms = (cat["forms"].get(key["phase"]) or {}).get(key["kernel"])
        if forms is None:
            return np.full(q.height, np.nan)
        seq = np.ones(q.height) if key["phase"] == "generation" else q["seq"]
        heads, dim = int(key["heads"]), int(key["head_dim"])
        return kda_sol(forms, q["batch"], seq, heads, dim, dim, int(key["d_conv"]), int(cat["chunk"]),
                       est.spec(key["system"]).mem_bw)[0]

    def evaluate(self, est, key, q, mode):
        """Every mode prices alike, as 0.12.0's handles do, but for the shared layer (reuse manifest, earlier versions:
        SILICON / HYBRID only): a kernel kda.yaml routes through a fused one that covers the shard answers the fused
        kernel's latency; a kernel without rows at this d_model the roofline (tier sol); else the rows, labelled
        `xshape` where they are at another head count than the query's."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        key = {**key, "shared": mode in SHARED_MODES}
        route = self._fused_route(est, key)
        if route is not None:
            fused = self.evaluate(est, {**key, "kernel": route["via"]}, q, mode)
            return Answer(fused.latency * float(route.get("factor", 1.0)), self.sol(est, key, q), fused.source)
        sol = self.sol(est, key, q)
        if not self._kernel_rows(est, key).height:
            if np.isnan(sol).any():
                raise NoDataError(f"{self.table} {key['system']}/{key['backend']}/{key['version']}: no rows for kernel "
                                  f"{key['kernel']} ({key['phase']}, d_model={key['d_model']}) and kda: no "
                                  f"{key['phase']} roofline for kernel {key['kernel']!r} in {KDA_YAML.name}")
            return Answer(sol, sol, tier_codes("sol", q.height))
        lat, miss = self.silicon(est, key, q)
        if miss.any():
            raise NoDataError(f"no silicon data can anchor {self.describe(key, q, int(np.flatnonzero(miss)[0]))}")
        read = self._slice(est, key)[1]
        return Answer(lat, sol, tier_codes("silicon" if read == int(key["heads"]) else "xshape", q.height))

    def _fused_route(self, est, key) -> dict | None:
        """kda.yaml `fused_routes` entry when this kernel has no rows at the query's heads and the fused one has."""
        route = (kda_catalog().get("fused_routes", {}).get(key["phase"]) or {}).get(key["kernel"])
        if route is None:
            return None

        def has_heads(kernel: str) -> bool:  # at the query's exact structure: elsewhere 0.12.0 reads the nearest one
            rows = self._kernel_rows(est, {**key, "kernel": kernel})
            exact = (pl.col("num_k_heads") == int(key["heads"])) & (pl.col("head_k_dim") == int(key["head_dim"])) \
                & (pl.col("head_v_dim") == int(key["head_dim"])) & (pl.col("d_conv") == int(key["d_conv"]))
            return rows.height > 0 and rows.filter(exact).height > 0

        return route if not has_heads(key["kernel"]) and has_heads(route["via"]) else None

    def _kernel_rows(self, est, key) -> pl.DataFrame:
        """Rows of one kernel/phase at the query's d_model: own backend first, then (key `shared`) donors, earlier
        versions and the cross-backend lenders."""

        def merged():  # own rows first, then the manifest's cross-backend lenders (sources.resolve)
            try:
                return est.table(key["system"], key["backend"], key["version"], self.table, shared=key["shared"])
            except NoDataError:
                return pl.DataFrame()

        def build():
            rows = est.memo(("kda_rows", key["system"], key["backend"], key["version"], key["shared"]), merged)
            if not rows.height:
                return rows
            return rows.filter(pl.col("kernel_source") == key["kernel"], pl.col("phase") == key["phase"],
                               pl.col("d_model") == int(key["d_model"]))

        if key["phase"] not in PHASES:
            raise NoDataError(f"kda: phase {key['phase']!r} is not priced (have {', '.join(PHASES)})")
        return est.memo(("kda_kernel_rows", key["shared"], key["system"], key["backend"], key["version"], key["kernel"],
                         key["phase"], key["d_model"]), build)

    def _slice(self, est, key):
        """(lookup structure, head count read): context a [batch][seq] Grid, decode (seq 1) a batch curve; typed
        miss if absent. A head / value dim or conv width the kernel was not collected at reads its nearest
        collected structure (head dims first, then d_conv, ties to the smaller), then an uncollected head count
        the nearest collected one at that structure (ties to the smaller), all unscaled, as 0.12.0 does inside
        SILICON."""
        def build():
            rows = self._kernel_rows(est, key).filter(pl.col("kernel_source") == key["kernel"], pl.col("phase") == key["phase"],
                                                      pl.col("num_k_heads") == pl.col("num_v_heads"))
            if not rows.height:
                raise NoDataError(f"{self.table} {key['system']}/{key['backend']}/{key['version']}: no rows for "
                                  f"kernel_source={key['kernel']}, phase={key['phase']}, d_model={key['d_model']}")
            dim, conv = int(key["head_dim"]), int(key["d_conv"])
            shapes = rows.select("head_k_dim", "head_v_dim", "d_conv").unique().rows()
            hk, hv, dc = min(shapes, key=lambda s: (abs(s[0] - dim) + abs(s[1] - dim), abs(s[2] - conv), s))
            rows = rows.filter(pl.col("head_k_dim") == hk, pl.col("head_v_dim") == hv, pl.col("d_conv") == dc)
            want = int(key["heads"])
            heads = min(rows["num_k_heads"].unique().to_list(), key=lambda h: (abs(h - want), h))
            rows = rows.filter(pl.col("num_k_heads") == heads)
            if key["phase"] == "generation":
                curve = rows.sort("batch_size").unique("batch_size", keep="first", maintain_order=True)
                return (curve["batch_size"].to_numpy(), curve["latency"].to_numpy()), heads

            def sol(q: dict) -> float:
                return float(self.sol(est, key, Queries(batch=np.array([q["batch"]]), seq=np.array([q["seq"]])))[0])

            return rows_grid(rows.rename({"batch_size": "batch", "seq_len": "seq"}), ("batch", "seq"), sol), heads

        return est.memo(("kda_slice", key["shared"], *(key[c] for c in self.group_keys)), build)

    def silicon(self, est, key, q):
        return self._answer(est, key, q, self._slice(est, key)[0])

    def _answer(self, est, key, q, found):
        """(latency, miss) from a slice's lookup structure (`ops/gdn.py` shares it): context the Grid (exact /
        bilinear / ragged SOL rescale inside, 4-leaf util transfer outside); decode the batch curve (lerp inside, the
        edge point's util outside). No roofline: in-data answers only."""
        if key["phase"] == "generation":
            sol = lambda b: self.sol(est, key, Queries(batch=b, seq=np.ones(len(b))))  # noqa: E731
            return eval_curve(*found, q["batch"], sol)
        lat = np.array([evaluate(found, {"batch": float(b), "seq": float(s)})[0]
                        for b, s in zip(q["batch"], q["seq"], strict=True)],
                       dtype=np.float64)
        return lat, ~np.isfinite(lat)
