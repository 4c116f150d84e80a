"""KDA op sweep: random `kda_kernel` queries vs aiconfigurator-core 0.12.0's KDAKernel, every slice holding kda_perf
in the wheel and in ../shared, every database mode.

Why: tests/estimator/test_kda.py pins a few points per kernel; this draws many per (slice, kernel): K3's shards
(96 heads / tp 1-16) and head counts nobody collected (1-200), head dims / conv widths off the collected 128 / 4,
d_model 4096 (no rows: the roofline), batch / seq inside and beyond the grids. 0.12.0 reads an uncollected head
count from the nearest collected one inside SILICON; ours does too and labels it `xshape` (the matrix tells it
from a kernel run at the shard), so `xshape` against 0.12.0's `silicon` agrees when the values do, and only then.
Prints every disagreement (value beyond 1e-9 relative, or tier), then agree / differ / one-sided misses per mode.

    .venv/bin/python benchmarks/kda_parity.py --n 4 --modes SILICON,HYBRID,EMPIRICAL,SOL
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO / ".." / "shared" / "aic" / "perfdb-095f58a" / "systems" / "data"
HEADS = [96, 48, 24, 12, 6, 3, 1, 2, 8, 16, 18, 32, 36, 64, 72, 128, 200]  # K3's shards first, then uncollected
REL = 1e-9


QUERY_VERSIONS = {"vllm": "0.24.0", "sglang": "0.5.14"}  # versions that reach the kda rows (earlier version, lender)


def slices(data: Path) -> list[tuple[str, str, str]]:
    """(system, backend, version) of every kda_perf table under a systems/data tree, plus the backend's query
    version where the system has one (vLLM 0.24.0 reads the 0.1.dev19262 rows, sglang 0.5.14 vLLM's conv rows)."""
    tables = {(p.parts[-5], p.parts[-3], p.parts[-2]) for p in data.glob("*/kda/*/*/kda_perf.parquet")}
    reach = {(s, b, QUERY_VERSIONS[b]) for s, b, _ in tables if b in QUERY_VERSIONS
             and any(data.glob(f"{s}/*/{b}/{QUERY_VERSIONS[b]}"))}
    return sorted(tables | reach)


def kernels(data: Path, cell) -> list[tuple[str, str]]:
    """The backend's collected (kernel, phase) pairs on that system plus every kda.yaml roofline kernel."""
    from perfledger.estimator.ops.kda import kda_catalog

    own = set()
    for path in (data / cell[0] / "kda" / cell[1]).glob("*/kda_perf.parquet"):
        rows = pl.read_parquet(path, columns=["kernel_source", "phase"]).unique().rows()
        own |= {(k, p) for k, p in rows if p in ("context", "generation")}
    return sorted(own | {(k, p) for p, ks in kda_catalog()["forms"].items() for k in ks})


def shared_systems(root: Path) -> str:
    """A systems folder through which 0.12.0 reads ../shared's tree: the wheel's system files beside it as data/."""
    from perfledger import settings

    for item in (settings.aic_package_dir() / "systems").iterdir():
        if item.name != "data":
            (root / item.name).symlink_to(item)
    (root / "data").symlink_to(SHARED_DATA.resolve())
    return str(root)


def reference(oracle, handles: dict, cell, mode: str, systems: str | None, op, phase: str, batch: int, seq: int):
    """(latency, tier) of 0.12.0, or None where it raises (a miss)."""
    key = (cell, mode)
    if key not in handles:  # raw data versions (0.1.dev19262) are not query slots: allowed unlisted
        kw = dict(systems_paths=systems, allow_unlisted_version=True)
        db = oracle.get_database(*cell, **kw) if mode == "SILICON" else oracle.get_view(*cell, database_mode=mode, **kw)
        handles[key] = oracle.EngineHandle.for_database(db, systems_path=systems)
    try:
        ref = handles[key].evaluate_ops_json(oracle.build([op]), is_context=phase == "context", batch_size=batch, s=seq,
                                             x=batch * seq if phase == "context" else batch)[0]
    except Exception as exc:  # noqa: BLE001 -- the reference signals misses with several exception types
        return None, f"{type(exc).__name__}: {str(exc)[:120]}"
    return (float(ref[1]), ref[3]), None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4, help="points per (slice, kernel)")
    ap.add_argument("--modes", default="SILICON,HYBRID,EMPIRICAL,SOL")
    ap.add_argument("--trees", default="wheel,shared")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if "," in args.trees:  # one process per tree: 0.12.0 caches kda rows per process across systems paths (the
        # wheel's gb300 vLLM 0.27.0 conv rows would reach a later ../shared handle, which lacks that version)
        return max(subprocess.run([sys.executable, __file__, "--n", str(args.n), "--modes", args.modes, "--seed",
                                   str(args.seed), "--trees", tree], check=False).returncode
                   for tree in args.trees.split(","))
    sys.path.insert(0, str(REPO))
    import aiconfigurator_core
    from aiconfigurator_core.sdk.operations import KDAKernel

    from perfledger.estimator.batch import estimate
    from perfledger.estimator.data.sources import TreeSource
    from perfledger.estimator.errors import EstimatorError
    from perfledger.estimator.session import Estimator, open_source
    from tests.estimator.oracle import Oracle

    wheel = Path(aiconfigurator_core.__file__).parent / "systems" / "data"
    oracle, handles, counts, worst, start = Oracle(), {}, Counter(), 0.0, time.perf_counter()
    tmp = tempfile.TemporaryDirectory()
    trees = {"wheel": (wheel, Estimator(open_source("aic-package")), None),
             "shared": (SHARED_DATA, Estimator(TreeSource(SHARED_DATA)), shared_systems(Path(tmp.name)))}
    modes = args.modes.split(",")
    for tree in args.trees.split(","):
        data, est, systems = trees[tree]
        for cell in slices(data):
            rng = np.random.default_rng([args.seed, *map(ord, tree + "".join(cell))])
            for kernel, phase in kernels(data, cell):
                for _ in range(args.n):
                    nk = int(rng.choice(HEADS))
                    hd = 128 if rng.random() < 0.85 else int(rng.choice([64, 96, 192, 256]))
                    dc = 4 if rng.random() < 0.9 else int(rng.choice([2, 3, 6]))
                    d_model = 7168 if rng.random() < 0.9 else 4096
                    batch = int(np.exp(rng.uniform(0, np.log(600 if phase == "context" else 5000))))
                    seq = int(np.exp(rng.uniform(0, np.log(100000)))) if phase == "context" else 1
                    op = KDAKernel("k", 1.0, kernel, phase, d_model, nk, hd, nk, hd, dc)
                    q = pl.DataFrame({"system": [cell[0]], "backend": [cell[1]], "version": [cell[2]],
                                      "kernel": [kernel], "phase": [phase], "heads": [nk], "head_dim": [hd],
                                      "d_conv": [dc], "d_model": [d_model], "batch": [batch], "seq": [seq]})
                    for mode in modes:
                        ref, why = reference(oracle, handles, cell, mode, systems, op, phase, batch, seq)
                        try:
                            out = estimate(est, "kda_kernel", q, mode=mode.lower())
                            ours = (float(out["latency_ms"][0]), out["source"][0])
                        except EstimatorError as exc:
                            ours, ours_why = None, f"{type(exc).__name__}: {str(exc)[:120]}"
                        what = (tree, mode, cell, kernel, phase, nk, hd, dc, d_model, batch, seq)
                        if ref is None and ours is None:
                            counts[mode, "both miss"] += 1
                        elif ref is None or ours is None:
                            side = "only we miss" if ours is None else "only 0.12.0 misses"
                            counts[mode, side] += 1
                            if counts[mode, side] <= 5:
                                print(side.upper(), *what, "ours", ours or ours_why, "0.12.0", ref or why)
                        else:
                            tier_ok = ours[1] == ref[1] or (ours[1] == "xshape" and ref[1] == "silicon")
                            if abs(ours[0] - ref[0]) > REL * abs(ref[0]) + 1e-15 or not tier_ok:
                                counts[mode, "differ"] += 1
                                print("DIFFER", *what, "ours", ours, "0.12.0", ref)
                            else:
                                worst = max(worst, abs(ours[0] - ref[0]) / abs(ref[0]) if ref[0] else 0.0)
                                counts[mode, "agree"] += 1
                                counts[mode, "agree as xshape"] += ours[1] == "xshape"
    for mode in modes:
        print(f"{mode}: " + ", ".join(f"{counts[mode, c]} {c}" for c in
                                      ("agree", "agree as xshape", "differ", "both miss", "only we miss",
                                       "only 0.12.0 misses")))
    total = sum(v for (_, c), v in counts.items() if c != "agree as xshape")
    differ = sum(counts[m, "differ"] for m in modes)
    print(f"{args.trees}: {total} queries, {differ} differ, max rel diff where agreeing {worst:.1e}, "
          f"{time.perf_counter() - start:.0f} s")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
