"""Thin adapter over aiconfigurator-core 0.12.0's public API, used only as the parity oracle."""

from __future__ import annotations


class Oracle:
    def __init__(self):
        from aiconfigurator_core.sdk import common
        from aiconfigurator_core.sdk.engine import EngineHandle, build_ops_json
        from aiconfigurator_core.sdk.perf_database import get_database, get_database_view

        self.common, self.EngineHandle, self.build = common, EngineHandle, build_ops_json
        self.get_database, self.get_view = get_database, get_database_view
        self._handles: dict = {}

    def handle(self, system: str, backend: str, version: str, mode: str = "SILICON"):
        key = (system, backend, version, mode)
        if key not in self._handles:
            if mode == "SILICON":
                db = self.get_database(system, backend, version)
            else:
                db = self.get_view(system, backend, version, database_mode=mode)
            self._handles[key] = self.EngineHandle.for_database(db)
        return self._handles[key]

    def run(self, handle, op, x: int):
        """(latency_ms, provenance) or (None, None) when the reference raises a missing-data error."""
        try:
            _, ms, _, _ = handle.evaluate_ops_json(self.build([op]), is_context=True, batch_size=1, s=1, x=int(x))[0]
        except Exception as exc:  # the reference signals misses with several exception types
            if "PerfDataNotAvailable" in type(exc).__name__ or "Empirical" in type(exc).__name__ or "missing" in str(exc):
                return None, None
            raise
        return ms, handle.last_provenance()

    def gemm(self, system, backend, version, quant, m, n, k, mode="SILICON", low_precision_input=False):
        from aiconfigurator_core.sdk.operations import GEMM

        op = GEMM("g", 1.0, int(n), int(k), self.common.GEMMQuantMode[quant], low_precision_input=bool(low_precision_input))
        return self.run(self.handle(system, backend, version, mode), op, m)

    def moe(self, system, backend, version, quant, distribution, gated, topk, experts, hidden, inter, tp, ep, tokens,
            mode="SILICON"):
        from aiconfigurator_core.sdk.operations import MoE

        op = MoE("moe", 1.0, int(hidden), int(inter), int(topk), int(experts), int(tp), int(ep),
                 self.common.MoEQuantMode[quant], distribution, 1, is_gated=bool(gated))
        return self.run(self.handle(system, backend, version, mode), op, tokens)

    def nccl(self, system, backend, version, op, quant, num_gpus, elements, mode="SILICON"):
        from aiconfigurator_core.sdk.operations import NCCL

        op = NCCL("c", 1.0, op, int(elements), int(num_gpus), self.common.CommQuantMode[quant])
        return self.run(self.handle(system, backend, version, mode), op, 1)

    def allreduce(self, system, backend, version, tp, hidden, tokens, mode="SILICON"):
        from aiconfigurator_core.sdk.operations import CustomAllReduce

        return self.run(self.handle(system, backend, version, mode), CustomAllReduce("c", 1.0, int(hidden), int(tp)), tokens)

    def context_attention(self, system, backend, version, fmha, kv, head_dim, window, kv_heads, heads, isl, batch,
                          qk_norm=False, mode="SILICON"):
        from aiconfigurator_core import _aiconfigurator_core as core

        op = core.ContextAttention("a", 1.0, int(heads), int(kv_heads), self.common.KVCacheQuantMode[kv],
                                   self.common.FMHAQuantMode[fmha], window_size=int(window), head_size=int(head_dim),
                                   use_qk_norm=bool(qk_norm))
        handle = self.handle(system, backend, version, mode)
        try:
            return handle.evaluate_ops_json(self.build([op]), is_context=True, batch_size=int(batch), s=int(isl),
                                            x=int(batch * isl))[0][1]
        except Exception as exc:
            if "PerfDataNotAvailable" in type(exc).__name__ or "Empirical" in type(exc).__name__:
                return None
            raise

    def generation_attention(self, system, backend, version, kv, head_dim, window, kv_heads, heads, batch, seq):
        from aiconfigurator_core import _aiconfigurator_core as core

        op = core.GenerationAttention("g", 1.0, int(heads), int(kv_heads), self.common.KVCacheQuantMode[kv],
                                      window_size=int(window), head_size=int(head_dim))
        handle = self.handle(system, backend, version)
        try:
            return handle.evaluate_ops_json(self.build([op]), is_context=False, batch_size=int(batch), s=int(seq),
                                            x=int(batch))[0][1]
        except Exception as exc:
            if "PerfDataNotAvailable" in type(exc).__name__:
                return None
            raise

    def mla(self, system, backend, version, op: str, row: dict, mode: str = "SILICON"):
        """(latency or None on a missing-data error, SOL) of one MLA op: context_mla | generation_mla | mla_bmm."""
        from aiconfigurator_core import _aiconfigurator_core as core

        q = self.common
        if op == "context_mla":
            o = core.ContextMLA("a", 1.0, int(row["heads"]), q.KVCacheQuantMode[row["kv_quant"]],
                                q.FMHAQuantMode[row["fmha_quant"]])
            ctx, b, s, x = True, row["batch"], row["isl"], row["batch"] * row["isl"]
        elif op == "generation_mla":
            o = core.GenerationMLA("g", 1.0, int(row["heads"]), q.KVCacheQuantMode[row["kv_quant"]])
            ctx, b, s, x = False, row["batch"], row["seq"], row["batch"]
        else:
            o = core.MLABmm("b", 1.0, int(row["heads"]), q.GEMMQuantMode[row["quant"]], if_pre=row["phase"] == "pre")
            ctx, b, s, x = False, row["tokens"], 1, row["tokens"]
        handle, ops = self.handle(system, backend, version, mode), self.build([o])
        kw = dict(is_context=ctx, batch_size=int(b), s=int(s), x=int(x))
        sol = handle.evaluate_ops_sol_json(ops, **kw)[0][1]
        try:
            return handle.evaluate_ops_json(ops, **kw)[0][1], sol
        except Exception as exc:
            if "PerfDataNotAvailable" in type(exc).__name__ or "Empirical" in type(exc).__name__:
                return None, sol
            raise

    def encoder_attention(self, system, backend, version, head_dim, heads, isl, batch, mode="SILICON"):
        """(latency, tier) of one ViT attention call (batch sequences of isl tokens), or (None, error class name) on a
        missing-data / no-empirical error."""
        from aiconfigurator_core import _aiconfigurator_core as core

        op = core.EncoderAttention("encoder_attention", 1.0, int(heads), int(head_dim),
                                   fmha_quant_mode=self.common.FMHAQuantMode.bfloat16, partial_rotary_factor=0.0)
        handle = self.handle(system, backend, version, mode)
        try:
            _, ms, _, tier = handle.evaluate_ops_json(self.build([op]), is_context=True, batch_size=int(batch), s=int(isl),
                                                      x=int(batch * isl))[0]
        except Exception as exc:
            name = type(exc).__name__
            if "PerfDataNotAvailable" in name or "Empirical" in name:
                return None, name
            raise
        return ms, tier
