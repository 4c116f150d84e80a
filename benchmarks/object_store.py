"""Object-store benchmark: one ingest of a ../shared subset into a local folder vs into S3 (a local moto server).

Starts moto's S3 server on a free port of 127.0.0.1 (no other network), ingests the same published-tree
folders into a fresh local warehouse and a fresh bucket `--repeat` times each, alternating, and prints
the medians side by side with their ratio, plus the re-ingest (unchanged content) time of each. moto
keeps objects in memory, so the ratio is the cost of the object-store protocol (requests, listings,
conditional puts, the lease), not of a network.

    .venv/bin/python benchmarks/object_store.py [--repeat 3] [--data ../shared/aic/perfdb-095f58a/systems/data]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

FOLDERS = ("b200_sxm/kda", "l40s/kda", "h200_sxm/mla_bmm", "h200_sxm/gemm/sglang/0.5.6.post2")


def _server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(endpoint + "/", timeout=2).close()
            return proc, endpoint
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit(f"moto server at {endpoint} did not start")


def _ingest_twice(sources: list[str], root: str) -> tuple[float, float]:
    from perfledger.warehouse.ingest import ingest
    from perfledger.warehouse.store import Warehouse

    start = time.perf_counter()
    ingest(sources, Warehouse(root))
    first = time.perf_counter() - start
    start = time.perf_counter()
    again = ingest(sources, Warehouse(root))
    assert again.new_batches == 0
    return first, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1] / ".." / "shared" / "aic" /
                        "perfdb-095f58a" / "systems" / "data")
    args = parser.parse_args()
    sources = [str(args.data / folder) for folder in FOLDERS]
    proc, endpoint = _server()
    os.environ["PERFLEDGER_STORAGE_OPTIONS"] = json.dumps({
        "aws_endpoint_url": endpoint, "aws_region": "us-east-1", "aws_access_key_id": "bench",
        "aws_secret_access_key": "bench", "aws_allow_http": "true"})
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    times: dict[str, list[tuple[float, float]]] = {"local": [], "s3": []}
    try:
        warmup = tempfile.mkdtemp(prefix="bench-warmup-")
        _ingest_twice(sources, warmup)  # imports and the catalog load, not measured
        shutil.rmtree(warmup, ignore_errors=True)
        for _ in range(args.repeat):
            folder = tempfile.mkdtemp(prefix="bench-local-")
            times["local"].append(_ingest_twice(sources, folder))
            shutil.rmtree(folder, ignore_errors=True)
            bucket = f"bench-{uuid.uuid4().hex[:10]}"
            urllib.request.urlopen(urllib.request.Request(f"{endpoint}/{bucket}", method="PUT"), timeout=10).close()
            times["s3"].append(_ingest_twice(sources, f"s3://{bucket}/wh"))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    local, s3 = (statistics.median(t[0] for t in times[k]) for k in ("local", "s3"))
    local_again, s3_again = (statistics.median(t[1] for t in times[k]) for k in ("local", "s3"))
    print(f"ingest of {len(FOLDERS)} folders, median of {args.repeat}:  local {local:.2f} s   s3 (moto) {s3:.2f} s"
          f"   ratio {s3 / local:.2f}")
    print(f"re-ingest, unchanged content:        local {local_again:.2f} s   s3 (moto) {s3_again:.2f} s"
          f"   ratio {s3_again / local_again:.2f}")


if __name__ == "__main__":
    main()
