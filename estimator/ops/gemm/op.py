"""GEMM: SOL roofline, SILICON site curves, EMPIRICAL util grid with the quant-transfer ladder."""

from __future__ import annotations

import numpy as np
import polars as pl

from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError
from perfledger.estimator.fit.nesting import nested_order
from perfledger.estimator.fit.roofline import gemm_sol
from perfledger.estimator.fit.transfer import pick_reference
from perfledger.estimator.fit.util_grid import build_util_grid, query_util
from perfledger.estimator.ops.base import Answer, OpModel, Queries, tier_codes
from perfledger.estimator.ops.gemm.sites import build_sites, silicon, silicon_power
from perfledger.estimator.quant.fp8_static import OVERHEADS, overhead, overhead_empirical, overhead_energy
from perfledger.estimator.quant.profiles import quant_profile, util_level

NEST = ["gemm_dtype", "m", "n", "k"]


class GemmModel(OpModel):
    name = "gemm"
    tables = ("gemm_perf", *(table for table, _ in OVERHEADS.values()))  # + fp8_static quantize overheads
    group_keys = ("system", "backend", "version", "quant", "low_precision_input", "below_grid_sol")
    value_columns = ("m", "n", "k")
    # below_grid_sol: a SILICON miss at an n below the collected n-grid answers the roofline (tier sol), as 0.12.0's
    # GEMM(below_grid_sol=True) does for Qwen3.5's narrow projections; HYBRID / EMPIRICAL are unchanged
    defaults = {"low_precision_input": False, "below_grid_sol": False}

    def evaluate(self, est, key, q, mode):
        if mode != "silicon" or not bool(key["below_grid_sol"]):
            return super().evaluate(est, key, q, mode)
        sol = self.sol(est, key, q)
        try:
            lat, miss = self.silicon(est, key, q)
        except NoDataError:
            lat, miss = np.full(q.height, np.nan), np.ones(q.height, dtype=bool)
        rows = self._rows(est, key, "fp8" if key["quant"] == "fp8_static" else key["quant"], shared=True)
        below = miss & (q["n"] < (rows["n"].min() if rows.height else np.inf))
        if (miss & ~below).any():
            return super().evaluate(est, key, q, mode)  # raises the typed miss
        source = tier_codes("silicon", q.height)
        source[below] = tier_codes("sol", 1)[0]
        energy = None if below.all() else self.energy(est, key, q, lat)
        if energy is not None and below.any():  # a roofline answer has no measured power
            energy = np.where(below, np.nan, energy)
        return Answer(np.where(below, sol, lat), sol, source, energy)

    def _roof(self, est, system: str, quant: str):
        spec = est.spec(system)
        prof = quant_profile("gemm", quant)
        return prof.memory, spec.tc_flops(prof.dtype), spec.mem_bw

    def sol(self, est, key, q):
        def build():
            return gemm_sol(q["m"], q["n"], q["k"], *self._roof(est, key["system"], key["quant"]))[0]

        return q.memo(("sol", key["system"], key["quant"]), build) if isinstance(q, Queries) else build()

    def _rows(self, est, key, quant: str, shared: bool) -> pl.DataFrame:
        df = est.table(key["system"], key["backend"], key["version"], self.table, shared=shared)
        return df.filter(pl.col("gemm_dtype") == quant)

    def _available(self, est, key, shared: bool) -> list[str]:
        df = est.table(key["system"], key["backend"], key["version"], self.table, shared=shared)
        return df["gemm_dtype"].unique(maintain_order=True).to_list()

    def silicon(self, est, key, q):
        quant = key["quant"]
        if quant == "fp8_static":
            return self._fp8_static(est, key, q)

        def build():
            rows = self._rows(est, key, quant, shared=True)
            if not rows.height:
                raise NoDataError(
                    f"GEMM perf data missing for quant {quant!r} at {key['system']}/{key['backend']}/{key['version']}; "
                    f"available: {self._available(est, key, True)}"
                )
            rows = nested_order(rows, NEST)
            power = rows["power"].cast(pl.Float64).fill_null(np.nan) if "power" in rows.columns else None
            return build_sites(rows["m"], rows["n"], rows["k"], rows["latency"], *self._roof(est, key["system"], quant),
                               power=power)

        return silicon(self._sites(est, key, quant, build), q["m"], q["n"], q["k"], sol=self.sol(est, key, q))

    @staticmethod
    def _sites(est, key, quant: str, build=None):
        return est.memo(("gemm_sites", key["system"], key["backend"], key["version"], quant), build)

    def energy(self, est, key, q, latency):
        """Measured power at the query (`sites.silicon_power`) × latency. fp8_static: the fp8 GEMM's energy (at the fp8
        latency) minus the quantize overheads' energies, floored at 0, as 0.12.0 prices it."""
        if key["quant"] == "fp8_static":
            fp8 = {**key, "quant": "fp8"}
            energy = self.energy(est, fp8, q, self._fp8_silicon(est, key, q)[0])
            if energy is None:
                return None
            where = (key["system"], key["backend"], key["version"])
            energy = energy - overhead_energy(est, *where, "compute_scale", q["m"], q["k"])
            if bool(key["low_precision_input"]):
                energy = energy - overhead_energy(est, *where, "scale_matrix", q["m"], q["k"])
            return np.maximum(energy, 0.0)
        power = silicon_power(self._sites(est, key, key["quant"]), q["m"], q["n"], q["k"])
        return None if power is None else power * latency

    def _fp8_silicon(self, est, key, q):
        """The fp8 GEMM's SILICON answer under an fp8_static query: latency and energy both start from it, so a
        slice's queries price it once."""
        def build():
            return self.silicon(est, {**key, "quant": "fp8"}, q)

        return q.memo(("fp8_silicon", key["system"], key["backend"], key["version"]), build) if isinstance(q, Queries) \
            else build()

    def _fp8_static(self, est, key, q, base=None, empirical_overheads=False):
        """fp8 GEMM minus compute_scale (and scale_matrix for low-precision inputs), floored at SOL.

        base=None: SILICON (fp8 sites); else a given fp8 estimate. The overheads use their grid lookups,
        except in EMPIRICAL mode proper (empirical_overheads), which uses their EMPIRICAL rules.
        """
        lat, miss = self._fp8_silicon(est, key, q) if base is None else (base, None)
        lookup = overhead_empirical if empirical_overheads else overhead
        where = (key["system"], key["backend"], key["version"])
        lat = lat - lookup(est, *where, "compute_scale", q["m"], q["k"])
        if bool(key["low_precision_input"]):
            lat = lat - lookup(est, *where, "scale_matrix", q["m"], q["k"])
        return np.maximum(lat, self.sol(est, key, q)), miss

    def _grid(self, est, key, ref_quant: str, sol_quant: str, shared: bool = False):
        """Util grid over ref_quant's own-version samples, utils priced with sol_quant's roofline."""

        def build():
            rows = self._rows(est, key, ref_quant, shared=shared)
            if not rows.height:
                return None
            rows = rows.unique(subset=NEST, keep="first", maintain_order=True).sort("m", "n", "k")  # ties: ascending
            m, n, k = (rows[c].to_numpy() for c in ("m", "n", "k"))
            sol = gemm_sol(m, n, k, *self._roof(est, key["system"], sol_quant))[0]
            lat = np.maximum(rows["latency"].to_numpy(), sol)
            return build_util_grid(np.column_stack([m, n, k]), sol / lat)

        return est.memo(("gemm_grid", key["system"], key["backend"], key["version"], ref_quant, sol_quant, shared), build)

    def empirical(self, est, key, q, shared=False):
        quant = key["quant"]
        if quant == "fp8_static":  # the fp8 estimate minus the quantize overheads, like SILICON
            lat, label = self.empirical(est, {**key, "quant": "fp8"}, q, shared)
            return self._fp8_static(est, key, q, base=lat, empirical_overheads=not shared)[0], label
        coords = np.column_stack([q["m"], q["n"], q["k"]])
        sol = self.sol(est, key, q)
        own = self._grid(est, key, quant, quant, shared)
        if own is not None:
            return sol / query_util(own, coords), "empirical"
        available = self._available(est, key, shared)
        ref = pick_reference("gemm", quant, [(a, (1.0,)) for a in available], (1.0,), lambda a, _feats, same: self._grid(
            est, key, a, quant if same else a, shared))
        if ref is None:
            raise EmpiricalUnavailableError(
                f"gemm {key['system']}/{key['backend']}/{key['version']}: no util grid for {quant!r} "
                f"nor a transfer reference among {available}"
            )
        grid, label, ref_quant = ref
        scale = 1.0
        if label == "xprofile":
            scale = util_level("gemm", quant_profile("gemm", quant).profile) / util_level(
                "gemm", quant_profile("gemm", ref_quant).profile
            )
        return sol / (query_util(grid, coords) * scale), label
