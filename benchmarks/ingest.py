"""Ingest benchmark: the whole aic wheel tree (736 files, 12.6M rows) vs a bare pyarrow read + write.

Each measurement runs in a fresh child process (so peak RSS is its own). Prints the medians side by
side, the ratio, the ingest's peak RSS and the re-ingest time of unchanged content.
Targets (2 cores): ratio <= 3, peak RSS <= 4 GiB, re-ingest <= 5 s.

    .venv/bin/python benchmarks/ingest.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
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


def run_child(kind: str) -> dict:
    out = Path(tempfile.mkdtemp(prefix=f"bench-{kind}-"))
    try:
        done = subprocess.run([sys.executable, __file__, "--child", kind, str(out)], check=True, capture_output=True, text=True)
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "OUT"))
    args = parser.parse_args()
    if args.child:
        kind, out = args.child
        result = (child_bare if kind == "bare" else child_ingest)(Path(out))
        result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(result))
        return
    bare, ours = [], []
    for i in range(args.repeat):  # interleaved, so machine noise hits both sides alike
        bare.append(run_child("bare"))
        ours.append(run_child("ingest"))
        print(f"run {i + 1}: bare {bare[-1]['seconds']:.1f} s, ingest {ours[-1]['seconds']:.1f} s "
              f"(re-ingest {ours[-1]['reingest_seconds']:.2f} s, peak RSS {ours[-1]['peak_rss_mib']:.0f} MiB)", flush=True)
    med = lambda runs, key: statistics.median(r[key] for r in runs)  # noqa: E731
    ratio = med(ours, "seconds") / med(bare, "seconds")
    print(f"\nrows ingested: {ours[0]['rows']:,}")
    print(f"{'':24}{'median':>10}")
    print(f"{'bare pyarrow r+w (s)':24}{med(bare, 'seconds'):>10.1f}")
    print(f"{'perfledger ingest (s)':24}{med(ours, 'seconds'):>10.1f}")
    print(f"{'ratio (target <= 3)':24}{ratio:>10.2f}")
    print(f"{'peak RSS MiB (<= 4096)':24}{med(ours, 'peak_rss_mib'):>10.0f}")
    print(f"{'re-ingest s (<= 5)':24}{med(ours, 'reingest_seconds'):>10.2f}")


if __name__ == "__main__":
    main()
