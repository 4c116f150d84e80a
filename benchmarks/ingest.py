"""Ingest benchmark: the whole aic wheel tree (736 files, 12.6M rows) vs a bare pyarrow read + write.

Each measurement runs in a fresh child process (so peak RSS is its own). Prints the medians side by
side, the ratio, the ingest's peak RSS and the re-ingest time of unchanged content.
Targets (2 cores): ratio <= 3, peak RSS <= 4 GiB, re-ingest <= 5 s.

`--runner dask` instead compares the local ingest with the distributed one (batch preparation on a
2-worker Dask LocalCluster through prefect-dask, windowed submission, commits streamed in the flow
process), side by side: seconds of the ingest itself (cluster start-up apart), the flow process's peak
RSS and the largest worker's.

    .venv/bin/python benchmarks/ingest.py [--repeat 3] [--runner dask]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child_bare(out: Path) -> dict:
    import pyarrow.parquet as pq

    from perfledger.warehouse.discover import aic_package_root

    root = aic_package_root()
    start = time.perf_counter()
    for path in sorted(root.glob("*/*/*/*/*.parquet")):
        target = out / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pq.read_table(path), target, compression="zstd")
    return {"seconds": time.perf_counter() - start}


def child_ingest(out: Path) -> dict:
    from perfledger.warehouse.ingest import ingest
    from perfledger.warehouse.store import Warehouse

    start = time.perf_counter()
    report = ingest(["aic-package"], Warehouse(out))
    first = time.perf_counter() - start
    start = time.perf_counter()
    again = ingest(["aic-package"], Warehouse(out))
    return {"seconds": first, "reingest_seconds": time.perf_counter() - start, "rows": report.rows_accepted
            + report.rows_duplicate + report.rows_quarantined, "new_on_reingest": again.new_batches}


def child_dask(out: Path) -> dict:
    """The wheel through partitioned_ingest on a 2-worker LocalCluster (a temporary Prefect server)."""
    from prefect import flow
    from prefect_dask import DaskTaskRunner

    from perfledger.flows.partitioned import partitioned_ingest

    runner = DaskTaskRunner(cluster_kwargs={"n_workers": 2, "threads_per_worker": 1, "processes": True,
                                            "dashboard_address": None})

    @flow(task_runner=runner)
    def distributed() -> dict:
        start = time.perf_counter()
        report = partitioned_ingest(["aic-package"], str(out))
        return {"seconds": time.perf_counter() - start, "rows": report["rows_accepted"] + report["rows_duplicate"]
                + report["rows_quarantined"]}

    result = distributed()
    result["worker_peak_rss_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return result


def run_child(kind: str) -> dict:
    out = Path(tempfile.mkdtemp(prefix=f"bench-{kind}-"))
    try:
        # a loaded machine can take longer than Prefect's default to start the dask child's temporary server
        env = {"PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180", **os.environ}
        done = subprocess.run([sys.executable, __file__, "--child", kind, str(out)], capture_output=True, text=True,
                              env=env)
        if done.returncode:
            raise SystemExit(f"{kind} run failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "OUT"))
    parser.add_argument("--runner", choices=("local", "dask"), default="local",
                        help="dask: the local ingest vs the distributed one, side by side")
    args = parser.parse_args()
    if args.child:
        kind, out = args.child
        result = {"bare": child_bare, "ingest": child_ingest, "dask": child_dask}[kind](Path(out))
        result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(result))
        return
    if args.runner == "dask":
        compare_runners(args.repeat)
        return
    bare, ours = [], []
    for i in range(args.repeat):  # interleaved, so machine noise hits both sides alike
        bare.append(run_child("bare"))
        ours.append(run_child("ingest"))
        print(f"run {i + 1}: bare {bare[-1]['seconds']:.1f} s, ingest {ours[-1]['seconds']:.1f} s "
              f"(re-ingest {ours[-1]['reingest_seconds']:.2f} s, peak RSS {ours[-1]['peak_rss_mib']:.0f} MiB)", flush=True)
    ratio = _median(ours, "seconds") / _median(bare, "seconds")
    print(f"\nrows ingested: {ours[0]['rows']:,}")
    print(f"{'':24}{'median':>10}")
    print(f"{'bare pyarrow r+w (s)':24}{_median(bare, 'seconds'):>10.1f}")
    print(f"{'perfledger ingest (s)':24}{_median(ours, 'seconds'):>10.1f}")
    print(f"{'ratio (target <= 3)':24}{ratio:>10.2f}")
    print(f"{'peak RSS MiB (<= 4096)':24}{_median(ours, 'peak_rss_mib'):>10.0f}")
    print(f"{'re-ingest s (<= 5)':24}{_median(ours, 'reingest_seconds'):>10.2f}")


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def compare_runners(repeat: int) -> None:
    """Local ingest vs the Dask path on the same wheel, interleaved; medians side by side."""
    local, dask = [], []
    for i in range(repeat):
        local.append(run_child("ingest"))
        dask.append(run_child("dask"))
        print(f"run {i + 1}: local {local[-1]['seconds']:.1f} s, dask {dask[-1]['seconds']:.1f} s", flush=True)
    assert local[0]["rows"] == dask[0]["rows"], "the runners ingested different row counts"
    print(f"\nrows ingested: {local[0]['rows']:,}")
    print(f"{'':28}{'local':>10}{'dask (2 workers)':>18}")
    print(f"{'ingest seconds (median)':28}{_median(local, 'seconds'):>10.1f}{_median(dask, 'seconds'):>18.1f}")
    print(f"{'flow process peak RSS MiB':28}{_median(local, 'peak_rss_mib'):>10.0f}{_median(dask, 'peak_rss_mib'):>18.0f}")
    print(f"{'largest worker peak RSS MiB':28}{'-':>10}{_median(dask, 'worker_peak_rss_mib'):>18.0f}")
    print(f"{'dask / local time':28}{_median(dask, 'seconds') / _median(local, 'seconds'):>10.2f}")


if __name__ == "__main__":
    main()
