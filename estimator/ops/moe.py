"""MoE: one expert-FFN block; SILICON is a token-axis curve per (quant, distribution, shape, tp, ep)."""

from __future__ import annotations

import numpy as np
import polars as pl

from perfledger.estimator.data.sources import first_wins, table_info
from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError
from perfledger.estimator.fit.curve import eval_curve
from perfledger.estimator.fit.roofline import moe_sol
from perfledger.estimator.fit.transfer import feature_distance, log_spans, pick_reference
from perfledger.estimator.fit.util_grid import build_util_grid, query_util
from perfledger.estimator.ops.base import OpModel
from perfledger.estimator.quant.profiles import quant_profile, util_level

MIN_LATENCY_MAX_TOKENS = 128  # trtllm nvfp4 gated MoE probes its min-latency kernel table up to here
FEATURES = ("topk", "num_experts", "hidden_size", "inter_size")
FEATURE_KEYS = ("topk", "experts", "hidden", "inter")
SHAPE = {
    "topk": "topk", "experts": "num_experts", "hidden": "hidden_size", "inter": "inter_size",
    "tp": "moe_tp_size", "ep": "moe_ep_size",
}


class MoeModel(OpModel):
    name = "moe"
    tables = ("moe_perf",)
    group_keys = ("system", "backend", "version", "quant", "distribution", "gated", *SHAPE)
    value_columns = ("tokens",)

    @staticmethod
    def phase_table(phase: str) -> str:
        """The table holding this op's rows for an inference phase (one for both; the wide-EP twin has one each)."""
        return MoeModel.tables[0]

    def _sol_fn(self, est, key):
        spec = est.spec(key["system"])
        prof = quant_profile("moe", key["quant"])
        flops = spec.tc_flops(prof.dtype)
        shape = [key[c] for c in ("hidden", "inter", "topk", "experts", "tp", "ep")]
        return lambda tokens: moe_sol(tokens, *shape, prof.memory, flops, spec.mem_bw, gated=bool(key["gated"]))[0]

    def sol(self, est, key, q):
        return self._sol_fn(est, key)(q["tokens"])

    def _table(self, est, key, kind, shared: bool = True) -> pl.DataFrame:
        """Rows of the kernel family for this gating (non-gated kernels carry a `_nongated` source)."""

        def build():
            df = est.table(key["system"], key["backend"], key["version"], self.table, shared=shared, dedupe=False)
            df = apply_quant_overrides(df)
            nongated = pl.col("kernel_source").str.contains("nongated")
            fast = pl.col("kernel_source").str.contains("min_latency")
            pools = {True: ~nongated & ~fast, False: nongated, "min_latency": fast}
            return {kind: first_wins(df.filter(expr), self.table) for kind, expr in pools.items()}

        return est.memo(("moe_table", key["system"], key["backend"], key["version"], shared), build)[kind]

    def _quant_order(self, est, key, shared: bool) -> list[str]:
        """The MoE quants in the order the table's rows first name them, over every kernel family."""

        def build():
            df = est.table(key["system"], key["backend"], key["version"], self.table, shared=shared, dedupe=False)
            return apply_quant_overrides(df)["moe_dtype"].unique(maintain_order=True).to_list()

        return est.memo(("moe_quant_order", key["system"], key["backend"], key["version"], shared), build)

    def _slice(self, df: pl.DataFrame, key) -> pl.DataFrame:
        slice_filter = pl.col("moe_dtype") == key["quant"]
        for col, table_col in SHAPE.items():
            slice_filter &= pl.col(table_col) == int(key[col])
        rows = df.filter(slice_filter)
        dist = key["distribution"]
        if not rows.filter(pl.col("distribution") == dist).height and rows.filter(pl.col("distribution") == "uniform").height:
            dist = "uniform"
        return rows.filter(pl.col("distribution") == dist).sort("num_tokens", maintain_order=True)

    def _curves(self, est, key, tokens):
        """The slice's token-curve rows, and (mask, rows) of the min-latency kernel where it answers first."""
        rows = self._slice(self._table(est, key, bool(key["gated"])), key)
        if not rows.height:  # as 0.12.0: the other gating's rows where its own has none at this shape (vLLM / sglang
            rows = self._slice(self._table(est, key, not bool(key["gated"])), key)  # hold gated kernels only: NemotronH)
        if not rows.height:
            where = ", ".join(f"{c}={key[c]}" for c in self.group_keys)
            raise NoDataError(f"no moe_perf slice for {where}")
        small = self._min_latency_rows(key, tokens)
        fast = self._slice(self._table(est, key, "min_latency"), key) if small.any() else None
        return rows, (small, fast) if fast is not None and fast.height else None

    def silicon(self, est, key, q):
        tokens, sol_fn = q["tokens"], self._sol_fn(est, key)
        rows, fast = self._curves(est, key, tokens)
        lat, miss = eval_curve(rows["num_tokens"].to_numpy(), rows["latency"].to_numpy(), tokens, sol_fn)
        if fast is not None:
            small, frows = fast
            lat[small], miss[small] = eval_curve(frows["num_tokens"].to_numpy(), frows["latency"].to_numpy(),
                                                 tokens[small], sol_fn)
        return lat, miss

    def energy(self, est, key, q, latency):
        """Power along the same token curve (lerp inside, the edge point's power outside; a row without power reads
        0 W; probed) × latency."""
        tokens = q["tokens"]
        rows, fast = self._curves(est, key, tokens)
        parts = [(np.ones(len(tokens), dtype=bool), rows)] + ([fast] if fast is not None else [])
        power = np.full(len(tokens), np.nan)
        for mask, part in parts:
            held = "power" in part.columns and part["power"].null_count() < part.height
            power[mask] = np.interp(tokens[mask], part["num_tokens"].to_numpy(),
                                    part["power"].fill_null(0.0).to_numpy()) if held else np.nan
        return None if np.isnan(power).all() else power * latency


    @staticmethod
    def _min_latency_rows(key, tokens):
        """Queries the min-latency kernel table answers first (trtllm nvfp4 gated, few tokens)."""
        return (tokens <= MIN_LATENCY_MAX_TOKENS) & (key["quant"] == "nvfp4") & bool(key["gated"])

    def _grid(self, est, key, slice_key, sol_key, shared: bool = False, kind=None):
        """Token-axis util grid of one own-version slice, utils priced with sol_key's quant and shape."""
        kind = bool(slice_key["gated"]) if kind is None else kind

        def build():
            rows = self._slice(self._table(est, key, kind, shared=shared), slice_key)
            if not rows.height:
                return None
            tokens = rows["num_tokens"].to_numpy()
            return build_util_grid(tokens[:, None], self._sol_fn(est, sol_key)(tokens) / rows["latency"].to_numpy())

        ident = tuple(slice_key[c] for c in self.group_keys) + tuple(sol_key[c] for c in self.group_keys)
        return est.memo(("moe_grid", shared, kind, *ident), build)

    def empirical(self, est, key, q, shared=False):
        """Own slice's util grid, else the transfer ladder over sibling slices (features topk, E, h, inter)."""
        tokens = q["tokens"][:, None]
        sol = self.sol(est, key, q)
        own = self._grid(est, key, key, key, shared)
        if own is not None:
            lat = sol / query_util(own, tokens)
            small = self._min_latency_rows(key, q["tokens"])
            fast = self._grid(est, key, key, key, shared, kind="min_latency") if small.any() else None
            if fast is not None:
                lat[small] = sol[small] / query_util(fast, tokens[small])
            return lat, "empirical"
        same = (pl.col("moe_tp_size") == int(key["tp"])) & (pl.col("moe_ep_size") == int(key["ep"]))
        # both kernel families are candidates; quants in the table's row order over both families (0.12.0 breaks
        # profile-distance ties by it: l40s trtllm's file opens with non-gated fp8, so a gated w4a16_mxfp4 query
        # borrows fp8 there, bf16 where bf16 rows come first), slices own gating first
        gating, slices = {}, {quant: [] for quant in self._quant_order(est, key, shared)}
        for gated in (bool(key["gated"]), not bool(key["gated"])):
            df = self._table(est, key, gated, shared=shared)
            for quant, *feats in df.filter(same).select("moe_dtype", *FEATURES).unique(maintain_order=True).iter_rows():
                if (quant, tuple(feats)) not in gating:
                    gating[(quant, tuple(feats))] = gated
                    slices[quant].append(tuple(feats))
        query_feats = tuple(float(key[c]) for c in FEATURE_KEYS)
        slices = {quant: fs for quant, fs in slices.items() if fs}
        candidates = [(quant, f) for quant, fs in slices.items() for f in fs]

        def grid_for(quant, feats, same_profile):
            if feats is None:  # xprofile: that quant's nearest slice holding the query's routing distribution
                span = log_spans(slices[quant])  # log features normalised over all its slices
                for near in sorted(slices[quant], key=lambda f: feature_distance(f, query_feats, span)):
                    if (grid := grid_for(quant, near, same_profile)) is not None:
                        return grid
                return None
            best = feats
            slice_key = {**key, "quant": quant, **dict(zip(FEATURE_KEYS, best, strict=True)),
                         "gated": gating[(quant, tuple(best))]}
            sol_key = {**slice_key, "quant": key["quant"]} if same_profile else slice_key
            sol_key = {**sol_key, "gated": key["gated"]}
            return self._grid(est, key, slice_key, sol_key, shared)

        ref = pick_reference("moe", key["quant"], candidates, query_feats, grid_for)
        if ref is None:
            raise EmpiricalUnavailableError(f"moe {key['system']}/{key['backend']}/{key['version']}: no util grid for "
                                            f"{key['quant']} tp={key['tp']} ep={key['ep']} nor a transfer reference")
        grid, label, ref_quant = ref
        scale = 1.0
        if label == "xprofile":
            scale = util_level("moe", quant_profile("moe", key["quant"]).profile) / util_level(
                "moe", quant_profile("moe", ref_quant).profile)
        return sol / (query_util(grid, tokens) * scale), label


def apply_quant_overrides(df: pl.DataFrame) -> pl.DataFrame:
    """Re-file rows of kernels the reference keys under another quant (tables.yaml quant_overrides)."""
    for rule in table_info(MoeModel.tables[0]).get("quant_overrides", []):
        hit = (pl.col("kernel_source") == rule["kernel_source"]) & (pl.col("moe_dtype") == rule["from"])
        df = df.with_columns(pl.when(hit).then(pl.lit(rule["to"])).otherwise(pl.col("moe_dtype")).alias("moe_dtype"))
    return df
