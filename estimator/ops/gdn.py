"""Gated DeltaNet (Qwen3.5 linear-attention) kernels from gdn_perf, as 0.12.0 prices them.

The plan asks for a logical kernel (causal_conv1d_fn / chunk_gated_delta_rule in prefill, causal_conv1d_update /
fused_sigmoid_gating_delta_rule_update in decode); gdn.yaml lists the physical kernel_source labels that answer it
per backend. Rows: own backend (version, donors, earlier versions), then the reuse manifest's cross-backend lenders
(`data/cross_backend.py`; SILICON / HYBRID only: 0.12.0's shared layer is off in EMPIRICAL and SOL), own rows first
at a structure. Lookups are at the exact shard structure (d_model,
k / v heads, head dims, d_conv): prefill a [batch][seq] Grid, decode a batch curve, as for KDA (`ops/kda.py`).
A structure without rows, or a state kernel at a mamba_ssm_dtype other than the rows' float32, is priced by the
gdn.yaml roofline with tier `sol`. 0.12.0 prices GDN alike in every database mode but for that shared layer (probed:
its SOL and EMPIRICAL handles answer the own collected rows too), and so does this op.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import polars as pl
import yaml

from perfledger.estimator.errors import NoDataError
from perfledger.estimator.fit.grid import evaluate_many, power_grid, rows_grid
from perfledger.estimator.fit.roofline import gdn_sol
from perfledger.estimator.ops.base import MODES, SHARED_MODES, Answer, Queries, tier_codes
from perfledger.estimator.ops.kda import PHASES, KdaModel

GDN_YAML = Path(__file__).with_name("gdn.yaml")
STRUCTURE = {"d_model": "d_model", "heads": "num_k_heads", "v_heads": "num_v_heads", "head_k_dim": "head_k_dim",
             "head_v_dim": "head_v_dim", "d_conv": "d_conv"}  # query key -> gdn_perf column


@cache
def gdn_catalog() -> dict:
    """gdn.yaml: per (phase, logical kernel) its physical sources, roofline forms and state flag."""
    return yaml.safe_load(GDN_YAML.read_text())


class GdnModel(KdaModel):
    """The KDA op's lookups (Grid / curve) over gdn_perf, at exact structures, the roofline elsewhere."""

    name = "gdn_kernel"
    tables = ("gdn_perf",)
    group_keys = ("system", "backend", "version", "kernel", "phase", *STRUCTURE, "state_dtype")
    value_columns = ("batch", "seq")
    defaults = {"head_k_dim": 128, "head_v_dim": 128, "d_conv": 4, "state_dtype": "float32", "seq": 1}

    def _kernel(self, key) -> dict:
        if key["phase"] not in PHASES:
            raise NoDataError(f"gdn: phase {key['phase']!r} is not priced (have {', '.join(PHASES)})")
        spec = gdn_catalog()["kernels"][key["phase"]].get(key["kernel"])
        if spec is None:
            known = ", ".join(gdn_catalog()["kernels"][key["phase"]])
            raise NoDataError(f"gdn: no {key['phase']} kernel {key['kernel']!r} in {GDN_YAML.name} (have {known})")
        return spec

    def sol(self, est, key, q):
        """The gdn.yaml roofline; decode kernels at seq 1."""
        cat, spec = gdn_catalog(), self._kernel(key)
        state = cat["state_bytes"].get(key["state_dtype"])
        if state is None:
            raise NoDataError(f"gdn: mamba_ssm_dtype {key['state_dtype']!r} not in {GDN_YAML.name} state_bytes")
        seq = np.ones(q.height) if key["phase"] == "generation" else q["seq"]
        return gdn_sol(spec["forms"], q["batch"], seq, int(key["heads"]), int(key["v_heads"]), int(key["head_k_dim"]),
                       int(key["head_v_dim"]), int(key["d_conv"]), int(cat["chunk"]), float(state),
                       est.spec(key["system"]).mem_bw)[0]

    def evaluate(self, est, key, q, mode):
        """Rows at the exact structure where the kernel reads them, else (and at grid holes) the roofline, tier sol."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        sol = self.sol(est, key, q)
        spec, key = self._kernel(key), {**key, "shared": mode in SHARED_MODES}
        if (spec.get("state") and key["state_dtype"] != "float32") or not self._kernel_rows(est, key).height:
            return Answer(sol, sol, tier_codes("sol", q.height))
        lat, miss = self.silicon(est, key, q)
        source = tier_codes("silicon", q.height)
        source[miss] = tier_codes("sol", 1)[0]
        energy = self.energy(est, key, q, lat)
        return Answer(np.where(miss, sol, lat), sol, source, None if energy is None else np.where(miss, np.nan, energy))

    def energy(self, est, key, q, latency):
        """The rows' measured power × latency: prefill a power Grid on the latency Grid's axes, decode the batch
        curve's power (lerp inside, the edge row's power outside, as MoE's token curve)."""
        rows = self._kernel_rows(est, key)
        if "power" not in rows.columns or rows["power"].null_count() == rows.height:
            return None
        if key["phase"] == "generation":
            curve = rows.sort("batch_size", maintain_order=True)
            return latency * np.interp(q["batch"], curve["batch_size"].to_numpy(), curve["power"].fill_null(0.0).to_numpy())
        grid = est.memo(("gdn_power", key["shared"], *(key[c] for c in self.group_keys)),
                        lambda: power_grid(rows.rename({"batch_size": "batch", "seq_len": "seq"}), ("batch", "seq")))
        coords = {"batch": np.asarray(q["batch"], dtype=np.float64), "seq": np.asarray(q["seq"], dtype=np.float64)}
        return latency * evaluate_many(grid, coords, lambda c: np.ones(len(c["batch"])))[0]

    def silicon(self, est, key, q):
        return self._answer(est, key, q, self._slice(est, key))  # one lookup structure, no head count to report

    def _kernel_rows(self, est, key) -> pl.DataFrame:
        """Rows of the logical kernel at the query's structure: own backend first, then cross-backend lenders; only
        the first physical kernel's rows (vLLM on Ada keeps its Triton scan beside the lent chunk_gated_delta_rule
        rows, as 0.12.0 does), the first row per (batch, seq) kept."""

        def merged():
            try:
                return est.table(key["system"], key["backend"], key["version"], self.table, shared=key["shared"])
            except NoDataError:
                return pl.DataFrame()

        def build():
            rows = est.memo(("gdn_rows", key["system"], key["backend"], key["version"], key["shared"]), merged)
            if not rows.height:
                return rows
            exact = [pl.col(col) == int(key[k]) for k, col in STRUCTURE.items()]
            rows = rows.filter(pl.col("kernel_source").is_in(self._kernel(key)["sources"]), pl.col("phase") == key["phase"],
                               *exact)
            if rows.height:  # one physical kernel per structure, never a blend: the first one's (own rows come first)
                rows = rows.filter(pl.col("kernel_source") == rows["kernel_source"][0])
            return rows.unique(["batch_size", "seq_len"], keep="first", maintain_order=True)

        return est.memo(("gdn_kernel_rows", key["shared"], *(key[c] for c in self.group_keys if c != "state_dtype")), build)

    def _slice(self, est, key):
        """Prefill: a [batch][seq] Grid over the roofline; decode: the batch curve."""

        def build():
            rows = self._kernel_rows(est, key)
            if key["phase"] == "generation":
                curve = rows.sort("batch_size", maintain_order=True)
                return curve["batch_size"].to_numpy(), curve["latency"].to_numpy()

            def sol(q: dict) -> float:
                return float(self.sol(est, key, Queries(batch=np.array([q["batch"]]), seq=np.array([q["seq"]])))[0])

            return rows_grid(rows.rename({"batch_size": "batch", "seq_len": "seq"}), ("batch", "seq"), sol)

        return est.memo(("gdn_slice", key["shared"], *(key[c] for c in self.group_keys)), build)
