"""Round trip: collect (cpu) -> `perfledger ingest` -> rows in the warehouse equal the rows written."""

from __future__ import annotations

import numpy as np
import polars as pl
from polars.testing import assert_frame_equal

from perfledger.collector.registry import load_registry
from tests.collector.conftest import cli, cli_json, write_grid


def test_collected_rows_land_unchanged_in_the_warehouse(tmp_path):
    out, wh = tmp_path / "out", tmp_path / "wh"
    grid = write_grid(tmp_path / "g.yaml", [{"gemm_dtype": "float32", "m": m, "n": 128, "k": 256} for m in (1, 7, 64)]
                      + [{"gemm_dtype": "float32", "m": 10**7, "n": 10**7, "k": 10**7}])
    cli("collect", "--ops", "gemm", "--grid", f"gemm={grid}", "--out", str(out))
    cli("collect", "--ops", "compute_scale", "scale_matrix", "--limit", "4", "--out", str(out))
    report = cli_json("ingest", str(out), "--warehouse", str(wh))
    assert report["failed_batches"] == [] and report["rows_quarantined"] == 0
    assert report["tables"] == {"gemm_perf": 3, "computescale_perf": 4, "scale_matrix_perf": 4}

    from perfledger.warehouse.store import Warehouse

    store = Warehouse(wh)
    for op in ("gemm", "compute_scale", "scale_matrix"):
        table = load_registry().get(op).table
        written = pl.read_csv(out / f"{table}.txt")
        keys = [c for c in written.columns if c != "version"]
        stored = store.read_curated(table, system="cpu_local", backend="cpu", version=np.__version__)
        assert stored["row_version"].unique().to_list() == [np.__version__]
        got = stored.select(*keys).sort(keys)
        assert_frame_equal(got, written.select(*keys).sort(keys), check_dtypes=False)
    batches = store.read_table("batch_tables")
    assert batches["failed_cases"].max() >= 1  # the unallocatable gemm case is in the ledger as attempted/failed
    again = cli_json("ingest", str(out), "--warehouse", str(wh))
    assert again["new_batches"] == 0
