"""Estimator speed vs aiconfigurator-core 0.12.0: 100k mixed GEMM queries and cold start, side by side.

Ours: one polars frame through estimator.batch.estimate (repeat batches reuse the per-shape neighbour
index; the first batch on a fresh estimator, which builds it, is printed too). Reference: its per-op
query loop (EngineHandle.evaluate_ops_json per GEMM). Cold start = load one system/backend/version and answer the
first query, each in a fresh interpreter (imports excluded, timed separately). Prints medians.
With --warehouse DIR it also times the warehouse lookups the matrix builder repeats (reuse donors, version
lists, a resolved table) on one cached WarehouseSource vs a fresh source per lookup (the uncached cost).
Run: .venv/bin/python benchmarks/estimator.py [--queries 100000] [--repeats 5] [--warehouse var/warehouse]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import sys
import time

import numpy as np
import polars as pl

SYSTEM, BACKEND, VERSION = "h200_sxm", "trtllm", "1.3.0rc20"
QUANTS = ("bfloat16", "fp8", "fp8_block")
# (n, k) of real projections (Qwen3-32B / Llama-3.1-8B / Qwen3-235B at tp 1..8) plus random off-grid ones
MODEL_NK = [(10240, 5120), (5120, 8192), (51200, 5120), (5120, 25600), (6144, 4096), (4096, 4096), (28672, 4096),
            (4096, 14336), (9216, 4096), (4096, 8192), (1280, 5120), (5120, 3200), (128256, 4096), (151936, 5120)]


def make_queries(count: int, seed: int = 0) -> pl.DataFrame:
    """Mixed GEMM queries: a third on collected (n, k), a third model shapes / tp splits, a third drawn
    from 2,000 random off-grid (n, k) shapes (a many-model sweep); m log-uniform in [1, 16384]."""
    rng = np.random.default_rng(seed)
    pool = np.exp(rng.uniform(np.log(256), np.log(40000), (2000, 2))).astype(int)
    grid = [(2**a, 2**b) for a in range(6, 16) for b in range(6, 16)]
    tps = np.array([1, 2, 4, 8])
    nk = []
    for kind in rng.integers(0, 3, count):
        if kind == 0:
            nk.append(grid[rng.integers(len(grid))])
        elif kind == 1:
            n, k = MODEL_NK[rng.integers(len(MODEL_NK))]
            nk.append((max(n // int(rng.choice(tps)), 1), k))
        else:
            nk.append(tuple(pool[rng.integers(len(pool))]))
    n, k = np.array(nk).T
    m = np.exp(rng.uniform(0, np.log(16384), count)).astype(np.int64)
    return pl.DataFrame({"system": SYSTEM, "backend": BACKEND, "version": VERSION,
                         "quant": rng.choice(QUANTS, count), "m": m, "n": n, "k": k})


def run_ours(queries: pl.DataFrame, est) -> tuple[float, pl.DataFrame]:
    from perfledger.estimator.batch import estimate

    t0 = time.perf_counter()
    out = estimate(est, "gemm", queries, mode="silicon")
    return time.perf_counter() - t0, out


def run_reference(queries: pl.DataFrame, handle) -> tuple[float, list]:
    from aiconfigurator_core.sdk import common
    from aiconfigurator_core.sdk.engine import build_ops_json
    from aiconfigurator_core.sdk.operations import GEMM

    rows = queries.select("quant", "m", "n", "k").rows()
    out = []
    t0 = time.perf_counter()
    for quant, m, n, k in rows:
        op = GEMM("g", 1.0, int(n), int(k), common.GEMMQuantMode[quant])
        out.append(handle.evaluate_ops_json(build_ops_json([op]), is_context=True, batch_size=1, s=1, x=int(m))[0][1])
    return time.perf_counter() - t0, out


COLD = {
    "ours": """
import time
import polars, numpy
from perfledger.estimator.session import Estimator, open_source
from perfledger.estimator.batch import estimate_one
t=time.perf_counter()
est=Estimator(open_source('aic-package'))
estimate_one(est,'gemm',system={s!r},backend={b!r},version={v!r},quant='bfloat16',m=1000,n=5000,k=3000)
print(time.perf_counter()-t)""",
    "reference": """
import time
from aiconfigurator_core.sdk import common
from aiconfigurator_core.sdk.perf_database import get_database
from aiconfigurator_core.sdk.operations import GEMM
from aiconfigurator_core.sdk.engine import EngineHandle, build_ops_json
t=time.perf_counter()
h=EngineHandle.for_database(get_database({s!r},{b!r},{v!r}))
h.evaluate_ops_json(build_ops_json([GEMM('g',1.0,5000,3000,common.GEMMQuantMode.bfloat16)]),is_context=True,batch_size=1,s=1,x=1000)
print(time.perf_counter()-t)""",
}


def cold_start(which: str, repeats: int) -> float:
    code = COLD[which].format(s=SYSTEM, b=BACKEND, v=VERSION)
    times = [float(subprocess.check_output([sys.executable, "-c", code], text=True).split()[-1]) for _ in range(repeats)]
    return statistics.median(times)


def warehouse_lookups(root: str, repeats: int) -> tuple[float, float]:
    """Median s for 20 lookup rounds (donors + versions + one resolve) on one source vs a fresh one each."""
    from perfledger.estimator.data.sources import WarehouseSource

    def rounds(make) -> float:
        start = time.perf_counter()
        for _ in range(20):
            src = make()
            src.reuse_donors(SYSTEM, "gemm", BACKEND, VERSION)
            src.versions(SYSTEM, "gemm", BACKEND)
            src.resolve(SYSTEM, BACKEND, VERSION, "gemm_perf")
        return time.perf_counter() - start

    shared = WarehouseSource(root)
    rounds(lambda: shared)
    warm = statistics.median(rounds(lambda: shared) for _ in range(repeats))
    fresh = statistics.median(rounds(lambda: WarehouseSource(root)) for _ in range(repeats))
    return warm, fresh


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warehouse", default=None, help="also time cached vs fresh WarehouseSource lookups")
    args = ap.parse_args()
    if args.warehouse:
        warm, fresh = warehouse_lookups(args.warehouse, args.repeats)
        print(f"{'20 lookup rounds, median s':<34}{'cached':>14}{'fresh':>14}{'ratio':>10}")
        print(f"{'':<34}{warm:>14.4f}{fresh:>14.4f}{fresh / warm:>9.1f}x")

    from aiconfigurator_core.sdk.engine import EngineHandle
    from aiconfigurator_core.sdk.perf_database import get_database

    from perfledger.estimator.session import Estimator, open_source

    queries = make_queries(args.queries)
    handle = EngineHandle.for_database(get_database(SYSTEM, BACKEND, VERSION))
    run_reference(queries.head(1000), handle)  # load tables once; throughput is measured warm on both sides
    firsts = []
    for _ in range(args.repeats):  # first batch on a fresh estimator: tables loaded, neighbour index empty
        est = Estimator(open_source("aic-package"))
        run_ours(queries.head(10), est)
        gc.collect()
        firsts.append(run_ours(queries, est)[0])
    ours, ref = [], []
    for _ in range(args.repeats):  # interleaved, so background load hits both sides alike
        gc.collect()
        ours.append(run_ours(queries, est))
        gc.collect()
        ref.append(run_reference(queries, handle))
    ours_t, ref_t = statistics.median(t for t, _ in ours), statistics.median(t for t, _ in ref)

    ref_vals = np.array([np.nan if v is None else v for v in ref[0][1]], dtype=np.float64)
    ours_vals = ours[0][1]["latency_ms"].to_numpy()
    agree = np.isfinite(ref_vals)
    max_rel = float(np.max(np.abs(ours_vals[agree] - ref_vals[agree]) / ref_vals[agree])) if agree.any() else float("nan")

    cold_ours, cold_ref = cold_start("ours", args.repeats), cold_start("reference", args.repeats)
    n = args.queries
    print(f"{'metric':<34}{'perfledger':>14}{'reference':>14}{'ratio':>10}")
    print(f"{'100k mixed GEMM, median s':<34}{ours_t:>14.4f}{ref_t:>14.4f}{ref_t / ours_t:>9.1f}x")
    print(f"{'throughput, queries/s':<34}{n / ours_t:>14,.0f}{n / ref_t:>14,.0f}{ref_t / ours_t:>9.1f}x")
    first = statistics.median(firsts)
    print(f"{'  first batch, index cold, s':<34}{first:>14.4f}{ref_t:>14.4f}{ref_t / first:>9.1f}x")
    print(f"{'cold start (load + 1st), median s':<34}{cold_ours:>14.4f}{cold_ref:>14.4f}{cold_ref / cold_ours:>9.2f}x")
    print(f"parity on this batch: {int(agree.sum())} answered by both, max rel err {max_rel:.2e}")


if __name__ == "__main__":
    main()
