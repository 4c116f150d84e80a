"""Benchmark: build the Kimi-K3 ledger on a warm warehouse (target <= 2 s), side by side with a full
re-derivation from the curated tables and with reading the same lanes straight from the Parquet tree.

Usage: .venv/bin/python benchmarks/ledger.py [--warehouse DIR] [--runs N] [--tree shared|aic-package]
Without --warehouse (or $PERFLEDGER_WAREHOUSE) a temporary warehouse is filled from the tree first
(../shared's perf DB, or the installed wheel's with `--tree aic-package`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_TREE = REPO / ".." / "shared" / "aic" / "perfdb-095f58a" / "systems" / "data"
TARGET_S = 2.0


def _median(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--warehouse", default=os.environ.get("PERFLEDGER_WAREHOUSE"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model", default="kimi-k3")
    parser.add_argument("--tree", choices=("shared", "aic-package"), default="shared")
    args = parser.parse_args()
    tree_root = SHARED_TREE
    if args.tree == "aic-package":
        from perfledger import settings

        tree_root = settings.aic_package_dir() / "systems" / "data"

    import polars as pl

    from perfledger.ledger.cells import derive_cells
    from perfledger.ledger.source import build_cells
    from perfledger.ledger.specs import find_spec
    from perfledger.ledger.state import current_cells
    from perfledger.warehouse.ingest import ingest
    from perfledger.warehouse.store import Warehouse

    root = Path(args.warehouse) if args.warehouse else Path(tempfile.mkdtemp(prefix="plw-bench-"))
    wh = Warehouse(root)
    if not wh.curated_tables():
        start = time.perf_counter()
        ingest([str(tree_root)], wh)
        print(f"filled {root} from {args.tree} in {time.perf_counter() - start:.1f} s")
    spec = find_spec(args.model)
    current_cells(wh, spec, record=True)  # warm-up: OS cache, Delta logs, stored state and inputs key

    def from_tree():
        tables = {}
        for table in dict.fromkeys(lane.table for lane in spec.lanes):
            parts = []
            for path in tree_root.glob(f"*/*/*/*/{table}.parquet"):
                system, _family, backend, version = path.parts[-5:-1]
                if system in spec.systems:
                    df = pl.read_parquet(path)
                    parts.append(df.drop("version", strict=False).with_columns(
                        system=pl.lit(system), backend=pl.lit(backend), version=pl.lit(version)))
            tables[table] = pl.concat(parts, how="diagonal_relaxed")
        return derive_cells(spec, tables)

    def every_column():  # the cold build before `columns=`: every column of each lane table, per system
        from perfledger.ledger.source import read_meta

        tables = {}
        for table in dict.fromkeys(lane.table for lane in spec.lanes):
            if table in wh.curated_tables():
                tables[table] = pl.concat([wh.read_curated(table, system=s) for s in spec.systems], how="diagonal_relaxed")
        return derive_cells(spec, tables, read_meta(wh))

    ours = _median(lambda: current_cells(wh, spec, record=True), args.runs)
    wide = _median(every_column, args.runs)
    full = _median(lambda: build_cells(wh, spec), args.runs)
    tree = _median(from_tree, args.runs)
    cells, reused = current_cells(wh, spec, record=True)
    assert reused, "the warm build did not reuse the stored state"
    assert cells.drop("first_ingest", "last_ingest").equals(build_cells(wh, spec).drop("first_ingest", "last_ingest"))
    print(f"{'case':<48}{'median s':>10}{'ratio':>10}")
    warm_case = f"ledger build {spec.model} (warm warehouse)"
    print(f"{warm_case:<48}{ours:>10.3f}{ours / TARGET_S:>10.2f}  (vs target {TARGET_S} s)")
    print(f"{'full re-derivation from curated tables':<48}{full:>10.3f}{full / TARGET_S:>10.2f}  (vs target)")
    print(f"{'  same, reading every column (before columns=)':<48}{wide:>10.3f}{wide / full:>10.2f}  (vs pruned)")
    print(f"{'same lanes from the Parquet tree (no lineage)':<48}{tree:>10.3f}{full / tree:>10.2f}  (full / tree)")
    print(f"cells {cells.height}, rows {int(cells['rows'].sum())}, "
          f"{dict(cells.group_by('status').len().sort('status').iter_rows())}; target {'met' if ours <= TARGET_S else 'MISSED'}")


if __name__ == "__main__":
    main()
