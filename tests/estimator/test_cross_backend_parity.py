"""Cross-backend channel parity with aiconfigurator-core 0.12.0, on slices where lent rows change the answer.

Queries are generated around the coordinates only the lenders hold (exact hits and jittered batch / sequence
neighbours), for every op family whose table the reuse manifest shares across frameworks: DSA and MLA module
ops (trtllm `default` rows lent to vLLM) and KDA (vLLM's conv rows lent to sglang; gb300 with two vLLM
versions). SILICON and HYBRID (0.12.0's shared layer is on in both) must agree with the reference in value and
tier, and a share of the queries must differ from the reference with its shared layer off, so that each
slice really exercises the channel. GEMM / attention tables lend nothing: a version without own rows misses.
"""

from __future__ import annotations

import zlib

import numpy as np
import polars as pl
import pytest

from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import NoDataError

pytestmark = pytest.mark.aic
GLM = "GlmMoeDsaForCausalLM"
DSA_ROWS = (pl.col("architecture") == GLM) & pl.col("gemm_type").is_in(["bfloat16", "fp8_block"])  # quants dsa.yaml prices


def _lent_only(est, system, backend, version, table, coords):
    """Resolved rows a lender holds at coordinates the active backend's own channels lack."""
    rows = est.table(system, backend, version, table, shared=True)
    lent = rows["_source_version"].str.contains("/")
    return rows.filter(lent).join(rows.filter(~lent).select(coords).unique(), on=coords, how="anti")


def _jitter(rng, value: int, lo: int = 1) -> int:
    """The value itself half the time, else a neighbour within ×0.6..×1.6 (off-grid, interpolated)."""
    return int(value) if rng.random() < 0.5 else max(lo, int(round(value * rng.uniform(0.6, 1.6))))


def _dsa(oracle, phase: str, q: dict):
    from aiconfigurator_core.sdk.operations import ContextDSAModule, GenerationDSAModule

    c = oracle.common
    kv, gemm = c.KVCacheQuantMode[q["kv_quant"]], c.GEMMQuantMode[q["gemm_quant"]]
    dsa = dict(index_topk_freq=4, dsa_full_layer_fraction=1.0, architecture=GLM)
    if phase == "context":
        return (ContextDSAModule("a", 1.0, q["heads"], kv, c.FMHAQuantMode.bfloat16, gemm, cp_size=1, **dsa),
                dict(is_context=True, batch_size=q["batch"], s=q["isl"], prefix=q["prefix"], x=q["batch"] * q["isl"]))
    return (GenerationDSAModule("g", 1.0, q["heads"], kv, gemm, **dsa),
            dict(is_context=False, batch_size=q["batch"], s=q["seq"], x=q["batch"]))


def _mla(oracle, phase: str, q: dict):
    from aiconfigurator_core.sdk.operations import MLAModule

    c, ctx = oracle.common, phase == "context"
    op = MLAModule("m", 1.0, ctx, q["heads"], c.KVCacheQuantMode[q["kv_quant"]],
                   c.FMHAQuantMode[q.get("fmha_quant", "bfloat16")], c.GEMMQuantMode[q["gemm_quant"]])
    s = q["isl"] if ctx else q["seq"]
    return op, dict(is_context=ctx, batch_size=q["batch"], s=s, x=q["batch"] * s if ctx else q["batch"])


def _kda(oracle, phase: str, q: dict):
    from aiconfigurator_core.sdk.operations import KDAKernel

    op = KDAKernel("k", 1.0, q["kernel"], phase, 7168, q["heads"], 128, q["heads"], 128, 4)
    ctx = phase == "context"
    return op, dict(is_context=ctx, batch_size=q["batch"], s=q["seq"], x=q["batch"] * q["seq"] if ctx else q["batch"])


def _dsa_queries(row, rng, phase):
    q = dict(kv_quant=row["kv_cache_dtype"], gemm_quant=row["gemm_type"], heads=_jitter(rng, row["num_heads"]),
             batch=_jitter(rng, row["batch_size"]), full_frac=1.0)
    if phase == "context":
        prefix = row["step"] if rng.random() < 0.5 else int(rng.integers(0, 2 * row["step"] + 2))
        return {**q, "isl": _jitter(rng, row["isl"]), "prefix": prefix}
    return {**q, "seq": _jitter(rng, row["step"] + 1, 2)}


def _mla_queries(row, rng, phase):
    q = dict(kv_quant=row["kv_cache_dtype"], gemm_quant=row["gemm_type"], heads=_jitter(rng, row["num_heads"]),
             batch=_jitter(rng, row["batch_size"]))
    if phase == "context":
        return {**q, "fmha_quant": row["mla_dtype"], "isl": _jitter(rng, row["isl"])}
    return {**q, "seq": _jitter(rng, row["step"] + 1, 2)}


def _kda_queries(row, rng, phase):
    return dict(kernel=row["kernel_source"], heads=row["num_k_heads"], batch=_jitter(rng, row["batch_size"]),
                seq=_jitter(rng, row["seq_len"]) if phase == "context" else 1, phase=phase)


DSA_KEYS = ["op_name", "model", "kv_cache_dtype", "gemm_type", "num_heads", "batch_size", "isl", "step"]
MLA_KEYS = ["mla_dtype", "kv_cache_dtype", "gemm_type", "num_heads", "batch_size", "isl", "step"]
FAMILIES = {  # op -> (table, coordinate columns, row filter, query maker, reference op maker, phase)
    "dsa_context_module": ("dsa_context_module_perf", DSA_KEYS, DSA_ROWS, _dsa_queries, _dsa, "context"),
    "dsa_generation_module": ("dsa_generation_module_perf", DSA_KEYS, DSA_ROWS, _dsa_queries, _dsa, "generation"),
    "mla_context_module": ("mla_context_module_perf", MLA_KEYS, pl.col("step") == 0, _mla_queries, _mla, "context"),
    "mla_generation_module": ("mla_generation_module_perf", MLA_KEYS, pl.lit(True), _mla_queries, _mla, "generation"),
    "kda_kernel": ("kda_perf", None, (pl.col("d_model") == 7168) & (pl.col("num_k_heads") == pl.col("num_v_heads"))
                   & (pl.col("head_k_dim") == 128) & (pl.col("d_conv") == 4), _kda_queries, _kda, None),
}
SLICES = [  # (op, system, backend, version, phase for kda), each with coordinates only the lenders hold
    ("dsa_generation_module", "b300_sxm", "vllm", "0.24.0", None),
    ("dsa_generation_module", "h100_sxm", "vllm", "0.24.0", None),
    ("dsa_generation_module", "b200_sxm", "vllm", "0.24.0", None),
    ("dsa_context_module", "h100_sxm", "vllm", "0.24.0", None),
    ("mla_context_module", "rtx_pro_6000_server", "vllm", "0.24.0", None),
    ("mla_generation_module", "rtx_pro_6000_server", "vllm", "0.24.0", None),
    ("mla_generation_module", "h100_sxm", "vllm", "0.24.0", None),
    ("kda_kernel", "b200_sxm", "sglang", "0.5.16", "context"),
    ("kda_kernel", "gb300", "sglang", "0.5.16", "context"),
]


def _reference(oracle, handle, op, kw):
    try:
        out = handle.evaluate_ops_json(oracle.build([op]), **kw)[0]
    except Exception as exc:  # the reference's typed miss
        assert "PerfDataNotAvailable" in type(exc).__name__, exc
        return None, None
    return out[1], out[3] or "silicon"


@pytest.fixture(scope="module")
def no_shared_layer(oracle):
    """0.12.0 with its shared layer off (own version only), per slice: the answer without the channel."""
    handles = {}

    def get(system, backend, version):
        if (system, backend, version) not in handles:
            db = oracle.get_database(system, backend, version, shared_layer=False, allow_unlisted_version=True)
            handles[system, backend, version] = oracle.EngineHandle.for_database(db)
        return handles[system, backend, version]

    return get


@pytest.mark.parametrize("mode", ["silicon", "hybrid"])
@pytest.mark.parametrize("op,system,backend,version,kda_phase", SLICES)
def test_lent_rows_answer_as_the_reference(wheel_est, oracle, no_shared_layer, op, system, backend, version,
                                           kda_phase, mode):
    table, coords, keep, make_query, make_op, phase = FAMILIES[op]
    phase = phase or kda_phase
    rows = _lent_only(wheel_est, system, backend, version, table, coords or [
        "kernel_source", "phase", "d_model", "d_conv", "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim",
        "batch_size", "seq_len"]).filter(keep)
    if op == "kda_kernel":
        rows = rows.filter(pl.col("phase") == phase)
    assert rows.height, f"{op} {system}/{backend}/{version}: no lent-only rows (the slice no longer tests the channel)"
    rng = np.random.default_rng(zlib.crc32(f"{op}/{system}/{mode}".encode()))
    picks = rng.choice(rows.height, size=min(40, rows.height), replace=False)
    handle = oracle.handle(system, backend, version, mode.upper())
    answered = changed = 0
    for i in picks:
        q = {"system": system, "backend": backend, "version": version, **make_query(rows.row(int(i), named=True), rng, phase)}
        ref_op, kw = make_op(oracle, phase, q)
        ref, tier = _reference(oracle, handle, ref_op, kw)
        try:
            out = estimate(wheel_est, op, pl.DataFrame({k: [v] for k, v in q.items()}), mode=mode)
            ours, label = out["latency_ms"][0], out["source"][0]
        except NoDataError:
            ours = label = None
        assert (ours is None) == (ref is None), f"one-sided miss {q} ours={ours} ref={ref}"
        if ref is None:
            continue
        answered += 1
        assert ours == pytest.approx(ref, rel=1e-6) and label == tier, (q, ours, ref, label, tier)
        without, _ = _reference(oracle, no_shared_layer(system, backend, version), ref_op, kw)
        changed += without is None or without != pytest.approx(ref, rel=1e-6)
    assert answered >= min(12, len(picks)) and changed >= max(1, answered // 4), (answered, changed)


@pytest.mark.parametrize("op", ["gemm", "attention"])
def test_tables_the_manifest_keeps_per_framework_lend_nothing(wheel_est, oracle, op):
    """h200 vLLM 0.19.0 has no gemm / attention rows of its own or earlier; sglang and trtllm have: both miss."""
    from aiconfigurator_core import _aiconfigurator_core as core
    from aiconfigurator_core.sdk.operations import GEMM

    c, where = oracle.common, dict(system="h200_sxm", backend="vllm", version="0.19.0")
    if op == "gemm":
        ref_op, kw = GEMM("g", 1.0, 4096, 4096, c.GEMMQuantMode.bfloat16), dict(is_context=True, batch_size=1, s=1, x=1024)
        q = dict(quant="bfloat16", m=1024, n=4096, k=4096)
    else:
        ref_op = core.ContextAttention("a", 1.0, 32, 8, c.KVCacheQuantMode.bfloat16, c.FMHAQuantMode.bfloat16,
                                       window_size=0, head_size=128)
        kw = dict(is_context=True, batch_size=4, s=2048, x=8192)
        q = dict(fmha_quant="bfloat16", kv_quant="bfloat16", head_dim=128, window=0, kv_heads=8, heads=32, isl=2048, batch=4)
    handle = oracle.EngineHandle.for_database(oracle.get_database(**where, allow_unlisted_version=True))
    assert _reference(oracle, handle, ref_op, kw) == (None, None)
    with pytest.raises(NoDataError, match="h200_sxm/vllm/0.19.0"):
        estimate(wheel_est, op, pl.DataFrame({k: [v] for k, v in {**where, **q}.items()}), mode="silicon")


@pytest.mark.parametrize("mode", ["silicon", "hybrid"])
def test_a_lender_newest_version_wins(wheel_est, oracle, mode):
    """gb300: vLLM 0.27.0 and 0.1.dev19262 both lend conv rows sglang 0.5.16 lacks, at different latencies;
    0.12.0 answers with 0.27.0's (lender versions newest first), and so do we."""
    rows = _lent_only(wheel_est, "gb300", "sglang", "0.5.16", "kda_perf", ["kernel_source", "phase", "d_model", "d_conv",
                      "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim", "batch_size", "seq_len"])
    older = wheel_est.source.read("gb300", "vllm", "0.1.dev19262", "kda_perf").select(
        "kernel_source", "num_k_heads", "batch_size", "seq_len", "d_model", pl.col("latency").alias("older"))
    both = rows.join(older, on=["kernel_source", "num_k_heads", "batch_size", "seq_len", "d_model"]).filter(
        pl.col("latency") != pl.col("older"), pl.col("d_model") == 7168)
    assert both.height >= 8 and set(both["_source_version"]) == {"vllm/0.27.0"}
    handle = oracle.handle("gb300", "sglang", "0.5.16", mode.upper())
    for row in both.head(12).iter_rows(named=True):
        q = dict(kernel=row["kernel_source"], heads=row["num_k_heads"], batch=row["batch_size"], seq=row["seq_len"],
                 phase="context")
        ref, _ = _reference(oracle, handle, *_kda(oracle, "context", q))
        ours = estimate(wheel_est, "kda_kernel", pl.DataFrame({k: [v] for k, v in {
            "system": "gb300", "backend": "sglang", "version": "0.5.16", **q}.items()}), mode=mode)["latency_ms"][0]
        assert ours == ref == row["latency"] != row["older"], row
