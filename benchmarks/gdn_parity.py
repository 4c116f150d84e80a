"""GDN op sweep: random `gdn_kernel` queries vs aiconfigurator-core 0.12.0's GDNKernel, every slice of the wheel
holding gdn_perf, every database mode.

Why: tests/estimator/test_gdn.py pins two kernels per slice; this draws many points per (slice, kernel): Qwen3.5
shards, shards only a cross-backend lender holds, shards nobody holds, d_model 7168 (no rows), bf16 states, batch /
seq inside and beyond the grids; it prints every disagreement (value beyond 1e-9 or tier) and a count.

    .venv/bin/python benchmarks/gdn_parity.py --n 10 --modes SILICON,HYBRID,EMPIRICAL,SOL
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

REPO = Path(__file__).resolve().parents[1]
KERNELS = [("causal_conv1d_fn", "context"), ("chunk_gated_delta_rule", "context"), ("causal_conv1d_update", "generation"),
           ("fused_sigmoid_gating_delta_rule_update", "generation")]
SHARDS = [(16, 32), (8, 16), (4, 8), (2, 4), (1, 2), (16, 64), (8, 32), (4, 16), (16, 48), (4, 12), (3, 7), (16, 16)]


def slices() -> list[tuple[str, str, str]]:
    import aiconfigurator_core

    data = Path(aiconfigurator_core.__file__).parent / "systems" / "data"
    return sorted((p.parts[-5], p.parts[-3], p.parts[-2]) for p in data.glob("*/linear_attention/*/*/gdn_perf.parquet"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10, help="points per (slice, kernel)")
    ap.add_argument("--modes", default="SILICON,HYBRID,EMPIRICAL,SOL")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from aiconfigurator_core.sdk.operations import GDNKernel

    from perfledger.estimator.batch import estimate
    from perfledger.estimator.session import Estimator, open_source
    from tests.estimator.oracle import Oracle

    est, oracle = Estimator(open_source("aic-package")), Oracle()
    bad = n = 0
    start = time.perf_counter()
    for cell in slices():
        rng = np.random.default_rng(sum(map(ord, "".join(cell))))
        for kernel, phase in KERNELS:
            for _ in range(args.n):
                d_model = int(rng.choice([2048, 3072, 4096, 5120, 7168]))
                nk, nv = SHARDS[rng.integers(len(SHARDS))]
                batch = int(np.exp(rng.uniform(0, np.log(200 if phase == "context" else 3000))))
                seq = int(np.exp(rng.uniform(0, np.log(60000)))) if phase == "context" else 1
                dtype = "bfloat16" if rng.random() < 0.1 else "float32"
                op = GDNKernel("k", 1.0, kernel, phase, d_model, nk, 128, nv, 128, 4, mamba_ssm_dtype=dtype)
                q = pl.DataFrame({"system": [cell[0]], "backend": [cell[1]], "version": [cell[2]], "kernel": [kernel],
                                  "phase": [phase], "d_model": [d_model], "heads": [nk], "v_heads": [nv], "batch": [batch],
                                  "seq": [seq], "state_dtype": [dtype]})
                for mode in args.modes.split(","):
                    ref = oracle.handle(*cell, mode).evaluate_ops_json(oracle.build([op]), is_context=phase == "context",
                                                                       batch_size=batch, s=seq, x=batch * seq)[0]
                    out = estimate(est, "gdn_kernel", q, mode=mode.lower())
                    ours = (float(out["latency_ms"][0]), out["source"][0])
                    n += 1
                    if abs(ours[0] - ref[1]) > 1e-9 * abs(ref[1]) + 1e-15 or ours[1] != ref[3]:
                        bad += 1
                        print("DIFFER", mode, cell, kernel, d_model, nk, nv, batch, seq, dtype, "ours", ours,
                              "0.12.0", (ref[1], ref[3]))
    print(f"{n} queries, {bad} differ, {time.perf_counter() - start:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
