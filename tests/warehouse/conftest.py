"""Fixtures for warehouse tests: tiny staging folders and published trees built per test."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from perfledger.warehouse.store import Warehouse

GEMM_HEADER = "framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency"


def gemm_line(m: int, latency: str = "0.5", *, n: int = 128, k: int = 256, dtype: str = "fp8") -> str:
    return f"vLLM,0.20.0.dev1,NVIDIA H200,gemm,vllm_cutlass,{dtype},{m},{n},{k},{latency}"


def write_staging(folder: Path, table: str, header: str, lines: list[str], *, batch: dict | None = None,
                  newline_at_end: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = "\n".join([header, *lines]) + ("\n" if newline_at_end else "")
    (folder / f"{table}.txt").write_text(text)
    if batch is not None:
        (folder / "batch.yaml").write_text("".join(f"{k}: '{v}'\n" for k, v in batch.items()))
    return folder


H200_VLLM = {"system": "h200_sxm", "backend": "vllm", "version": "0.20.0"}


def write_tree_table(root: Path, rel: str, frame: pl.DataFrame, meta: str | None = None) -> Path:
    """Write `<root>/<system>/<family>/<backend>/<version>/<table>.parquet` with a collection_meta."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(path)
    meta = meta or f"schema_version: 1\ntables:\n  {path.stem}:\n    status: complete\n"
    (path.parent / "collection_meta.yaml").write_text(meta)
    return path


def gemm_frame(ms: list[int], latencies: list[float] | None = None) -> pl.DataFrame:
    latencies = latencies or [0.01 * (i + 1) for i in range(len(ms))]
    n = len(ms)
    return pl.DataFrame({
        "framework": ["SGLang"] * n, "version": ["0.5.14"] * n, "device": ["NVIDIA H200"] * n,
        "op_name": ["gemm"] * n, "kernel_source": ["sglang_default"] * n, "gemm_dtype": ["fp8"] * n,
        "m": ms, "n": [1024] * n, "k": [2048] * n, "latency": latencies,
    })


def snapshot(warehouse: Warehouse) -> dict[str, int | None]:
    """Every Delta table's version: equal snapshots mean nothing was written."""
    names = ["batches", "batch_tables", "quarantine", "advisories", "duplicates", "reuse"]
    state = {name: warehouse.table_version(name) for name in names}
    state.update({f"curated/{t}": warehouse.table_version(t, curated=True) for t in warehouse.curated_tables()})
    return state


@pytest.fixture
def warehouse(tmp_path: Path) -> Warehouse:
    return Warehouse(tmp_path / "wh")
