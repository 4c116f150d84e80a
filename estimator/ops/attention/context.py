"""Context attention: a Grid over [num_heads][isl][batch] per (fmha quant, kv quant, head_dim, window, kv heads).

Interpolation follows the Grid rules (sqrt-latency along isl, ragged SOL rescale, nearest-leaf util
transfer outside the data). Which rows form the Grid follows the reference's filing: heads == kv_heads
queries read the MHA pool (all such rows), other queries their kv-heads slice less its heads == kv rows.
Every call also pays the per-call side memory ops (RoPE, KV write, optional q/k norm;
ops/attention/side_ops.py), a term constant in isl and batch, in SILICON and in SOL.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from perfledger.estimator.fit.grid import evaluate, power_grid, rows_grid
from perfledger.estimator.fit.roofline import context_attention_sol
from perfledger.estimator.fit.util_grid import build_util_grid, query_util
from perfledger.estimator.ops.attention.head_size import head_ratio, reference_head_size
from perfledger.estimator.ops.attention.kernel_lanes import pool_rows
from perfledger.estimator.ops.attention.side_ops import side_latency
from perfledger.estimator.ops.base import OpModel

KV_BYTES = {"bfloat16": 2.0, "float16": 2.0, "fp8": 1.0, "int8": 1.0}
FMHA_DTYPE = {"bfloat16": "bfloat16", "float16": "bfloat16", "fp8": "fp8", "fp8_block": "fp8"}
AXES = ("num_heads", "isl", "batch_size")
LANE_COLUMNS = ("attn_dtype", "kv_cache_dtype", "head_dim", "window_size", "num_key_value_heads")


def pool_picker(model, est, key):
    """heads -> the Grid serving it (MHA pool when heads == kv_heads, else GQA), None when that pool is empty."""
    from perfledger.estimator.errors import NoDataError

    grids: dict = {}

    def pick(heads):
        mha = int(heads) == int(key["kv_heads"])
        if mha not in grids:
            try:
                grids[mha] = model._grid(est, key, mha)
            except NoDataError:
                grids[mha] = None
        return grids[mha]

    return pick


def pooled_empirical(model, est, key, q, shared: bool, axes: tuple[str, ...]) -> tuple[np.ndarray, str]:
    """EMPIRICAL over the query's pool (MHA when heads == kv_heads, else GQA): SOL(q) / util from a UtilGrid.

    `model._rows(est, key, mha, shared)` gives the pool's rows, `model._pool_sol(est, key, mha)` its SOL over
    (heads, *other value columns). A pool without samples borrows, in order: the reference head size at the
    query window, then the own and reference head sizes at window 0 (attention_headsize.yaml); a borrowed head
    size is labelled xshape and, for context attention, its util scaled by the head-size ratio. The util
    always prices the query's own (windowed, head-size) SOL.
    Samples enter the grid sorted along `axes` (0.12.0 walks its nested table in key order, not file order):
    equidistant neighbours, common at clamped lattice corners, resolve by that order.
    A pool without any of these raises EmpiricalUnavailableError naming the slice. Queries of one pool only
    (the models' `evaluate` splits by pool), so one label answers them all.
    """
    from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError

    def build(mha, k, lane=None):
        try:
            rows = model._rows(est, k, mha, shared, lane).sort(list(axes), maintain_order=True)
        except NoDataError:
            return None
        coords = rows.select(axes).to_numpy().astype(np.float64)
        return build_util_grid(coords, model._pool_sol(est, k, mha)(*coords.T) / rows["latency"].to_numpy())

    def grid_for(mha):
        """(grid, util scale, label) of the first pool with samples along the borrow order, else None."""
        own = int(key["head_dim"])

        def candidates(window):  # lazy: the reference size is resolved only when the own size has no samples
            yield own, None
            ref = est.memo(("attn_ref", model.name, mha, shared, window, *(key.get(c) for c in model.group_keys)),
                           lambda: reference_head_size(model, est, key, mha, shared, window))
            if ref is not None and ref[0] != own:
                yield ref

        for window in (int(key["window"]), 0) if int(key["window"]) else (0,):
            for size, lane in candidates(window):
                k = {**key, "window": window, "head_dim": size}
                grid = est.memo(("attn_util", model.name, mha, shared, lane, *(k.get(c) for c in model.group_keys)),
                                lambda k=k, lane=lane: build(mha, k, lane))
                if grid is not None:
                    scale = 1.0 if size == own else model.head_scale(key, own, size)
                    return grid, scale, "empirical" if size == own else "xshape"
        return None

    heads = np.asarray(q["heads"])
    pools = set((heads.astype(np.int64) == int(key["kv_heads"])).tolist())
    if len(pools) != 1:
        raise ValueError(f"{model.name}: pooled_empirical needs queries of one pool (MHA or GQA), got both")
    mha = pools.pop()
    found = grid_for(mha)
    if found is None:
        where = "/".join(str(key.get(c)) for c in model.group_keys)
        raise EmpiricalUnavailableError(f"{model.name}: no {'MHA' if mha else 'GQA'} samples for {where} "
                                        "(own or borrowed head size, own window or window 0)")
    grid, scale, label = found
    coords = np.column_stack([np.asarray(q[c], dtype=np.float64) for c in model.value_columns])
    return model._pool_sol(est, key, mha)(*coords.T) / (query_util(grid, coords) * scale), label


def pool_power(model, est, key, mha: bool, axes: tuple[str, ...]):
    """The pool's measured-power Grid (`fit/grid.power_grid`), None without power or without the pool."""
    from perfledger.estimator.errors import NoDataError

    def build():
        try:
            return power_grid(model._rows(est, key, mha), axes)
        except NoDataError:
            return None

    return est.memo(("attn_power", model.name, mha, *(key.get(c) for c in model.group_keys)), build)


def evaluate_by_pool(model, est, key, q, mode, evaluate):
    """Run `evaluate(key, q, mode)` per pool (MHA rows, GQA rows) and merge: each pool borrows on its own."""
    from perfledger.estimator.ops.base import Answer

    mha = np.asarray(q["heads"]).astype(np.int64) == int(key["kv_heads"])
    if mha.all() or not mha.any():
        return evaluate(key, q, mode)
    latency, sol, source = np.empty(q.height), np.empty(q.height), np.empty(q.height, dtype=np.int8)
    energy = np.full(q.height, np.nan)
    for rows in (np.flatnonzero(mha), np.flatnonzero(~mha)):
        part = evaluate(key, q.take(rows), mode)
        latency[rows], sol[rows], source[rows] = part.latency, part.sol, part.source
        if part.energy is not None:
            energy[rows] = part.energy
    return Answer(latency, sol, source, energy)


class ContextAttentionModel(OpModel):
    name = "attention"
    group_keys = ("system", "backend", "version", "fmha_quant", "kv_quant", "head_dim", "window", "kv_heads", "qk_norm",
                  "lane_defaults", "prefix", "side_ops")
    value_columns = ("heads", "isl", "batch")
    # lane_defaults: static engines pin the framework lane; prefix: cached tokens of each request's isl (see _prefix_share);
    # side_ops: the call pays the kernel's side ops (a context-parallel rank's second zigzag call shares the first's)
    defaults = {"qk_norm": False, "lane_defaults": False, "prefix": 0, "side_ops": True}
    tables = ("context_attention_perf",)
    lane_columns = LANE_COLUMNS

    @staticmethod
    def quant_filters(key) -> dict:
        return {"attn_dtype": key["fmha_quant"], "kv_cache_dtype": key["kv_quant"]}

    @staticmethod
    def head_scale(key, own: int, ref: int) -> float:
        """Borrowed util × ratio(own) / ratio(ref): the backend's prefill head-size ratio table."""
        return head_ratio(key["backend"], own) / head_ratio(key["backend"], ref)

    def _sol_fn(self, est, key):
        spec = est.spec(key["system"])
        if key["kv_quant"] not in KV_BYTES or key["fmha_quant"] not in FMHA_DTYPE:
            from perfledger.estimator.errors import UnknownQuantError

            raise UnknownQuantError(f"attention quant fmha={key['fmha_quant']!r} kv={key['kv_quant']!r} not priced")
        flops = spec.tc_flops(FMHA_DTYPE[key["fmha_quant"]])
        kv_mem, hd, win, nkv = KV_BYTES[key["kv_quant"]], int(key["head_dim"]), int(key["window"]), int(key["kv_heads"])

        def sol(heads, isl, batch, kv_heads=nkv, prefix=0):
            return context_attention_sol(batch, np.asarray(isl) - prefix, prefix, heads, kv_heads, hd, win, kv_mem, flops,
                                         spec.mem_bw)[0]

        return sol

    def _prefix_share(self, est, key, q):
        """With a cached prefix the kernel prices the whole isl's lookup scaled by the new tokens' share of causal
        attention math, 1 - (prefix / isl)^2, window or not, side ops unscaled, as 0.12.0 does (probed on Qwen3-32B
        and gpt-oss-120b h200 vLLM from isl 100 / prefix 40 to isl 3000 / prefix 2999: not the roofline's share)."""
        prefix = int(key.get("prefix") or 0)
        return 1.0 - (prefix / np.asarray(q["isl"], dtype=np.float64)) ** 2 if prefix else 1.0

    def _side(self, est, key, q, sol_only: bool):
        if not key.get("side_ops", True):
            return 0.0
        return side_latency(est.spec(key["system"]), key["fmha_quant"], bool(key["qk_norm"]), q["heads"],
                            int(key["kv_heads"]), int(key["head_dim"]), sol_only=sol_only)

    def sol(self, est, key, q):
        kernel = self._sol_fn(est, key)(q["heads"], q["isl"], q["batch"], prefix=int(key.get("prefix") or 0))
        return kernel + self._side(est, key, q, True)

    def _pool_sol(self, est, key, mha: bool):
        """SOL over (heads, isl, batch) for a pool: the MHA pool's kv heads follow heads."""
        base = self._sol_fn(est, key)
        return (lambda h, s, b: base(h, s, b, h)) if mha else base

    def _rows(self, est, key, mha: bool, shared: bool = True, lane: str | None = None) -> pl.DataFrame:
        """The pool's rows from the first lane holding them (or from `lane`)."""
        filters = {"attn_dtype": key["fmha_quant"], "kv_cache_dtype": key["kv_quant"], "head_dim": int(key["head_dim"]),
                   "window_size": int(key["window"])}
        return pool_rows(est, key, self.table, filters, mha, LANE_COLUMNS, shared=shared, lane=lane)

    def _grid(self, est, key, mha: bool = False):
        """GQA pool: the kv-heads slice without its heads == kv rows; MHA pool: every heads == kv row.

        The reference files rows with heads == kv_heads under one MHA table (kv following heads) and
        answers a heads == kv query from it; the other rows of a kv-heads slice form its GQA table.
        """
        def build():
            rows = self._rows(est, key, mha)
            sol = self._sol_fn(est, key)
            if mha:
                return rows_grid(rows, AXES, lambda c: float(sol(c["num_heads"], c["isl"], c["batch_size"], c["num_heads"])),
                                 sqrt_axes=("isl",))
            return rows_grid(rows, AXES, lambda c: float(sol(c["num_heads"], c["isl"], c["batch_size"])), sqrt_axes=("isl",))

        return est.memo(("attn_grid", mha, *(key.get(c) for c in self.group_keys)), build)

    def silicon(self, est, key, q):
        pick = pool_picker(self, est, key)
        out = np.empty(q.height)
        for i, (h, s, b) in enumerate(zip(q["heads"], q["isl"], q["batch"], strict=True)):
            value, grid = None, pick(h)
            if grid is not None:
                value, _ = evaluate(grid, {"num_heads": int(h), "isl": int(s), "batch_size": int(b)})
            out[i] = np.nan if value is None else value
        return out * self._prefix_share(est, key, q) + self._side(est, key, q, False), np.isnan(out)

    def energy(self, est, key, q, latency):
        """The pool's measured power, Grid-blended over [heads, isl, batch] as `fit/grid.power_grid` says, × the kernel's
        latency: the side ops carry no power (0.12.0's energy is the kernel's alone, probed on b200 vLLM 0.22.0)."""
        pools = set((np.asarray(q["heads"]).astype(np.int64) == int(key["kv_heads"])).tolist())
        grids = {mha: pool_power(self, est, key, mha, AXES) for mha in pools}
        if all(g is None for g in grids.values()):
            return None
        power = np.full(q.height, np.nan)
        for i, (h, s, b) in enumerate(zip(q["heads"], q["isl"], q["batch"], strict=True)):
            grid = grids[int(h) == int(key["kv_heads"])]
            if grid is not None:
                value, _ = evaluate(grid, {"num_heads": int(h), "isl": int(s), "batch_size": int(b)})
                power[i] = np.nan if value is None else value
        return power * (latency - self._side(est, key, q, False))

    def empirical(self, est, key, q, shared: bool = False):
        """SOL / util of the pool's UtilGrid over [heads, isl, batch] (borrowing as pooled_empirical says); side ops added."""
        latency, label = pooled_empirical(self, est, key, q, shared, AXES)
        return latency * self._prefix_share(est, key, q) + self._side(est, key, q, False), label

    def evaluate(self, est, key, q, mode):
        """HYBRID / EMPIRICAL run per pool (MHA, GQA): each borrows, and is labelled, on its own. The q/k norm side
        ops are charged in every mode (0.12.0 does; its SOL holds their SOL terms too)."""
        if mode not in ("hybrid", "empirical"):
            return super().evaluate(est, key, q, mode)
        return evaluate_by_pool(self, est, key, q, mode, lambda k, part, m: OpModel.evaluate(self, est, k, part, m))
