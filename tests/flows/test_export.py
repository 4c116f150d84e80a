"""`perfledger export aic OUT`: the public layout, read back by aiconfigurator-core's own loader."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.warehouse.export import ExportError, export_aic, public_columns
from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.store import Warehouse

pytestmark = pytest.mark.aic
SLICE = Path("h200_sxm") / "gemm" / "vllm" / "0.24.0"
SHAPES = [(1, 4096, 4096), (128, 7168, 2048), (4096, 4608, 3584), (77, 1000, 3000)]


@pytest.fixture
def wheel_systems(aic_core) -> Path:
    return Path(aic_core.__file__).parent / "systems"


def gemm_latencies(systems_root: Path) -> list[float]:
    """bf16 GEMM latency for SHAPES through aiconfigurator-core's loader and engine."""
    from aiconfigurator_core.sdk import common
    from aiconfigurator_core.sdk.engine import EngineHandle, build_ops_json
    from aiconfigurator_core.sdk.operations import GEMM
    from aiconfigurator_core.sdk.perf_database import get_database

    db = get_database("h200_sxm", "vllm", "0.24.0", systems_paths=str(systems_root))
    handle = EngineHandle.for_database(db, systems_path=str(systems_root))
    return [handle.evaluate_ops_json(build_ops_json([GEMM("g", 1.0, n, k, common.GEMMQuantMode["bfloat16"])]),
                                     is_context=True, batch_size=1, s=1, x=m)[0][1] for m, n, k in SHAPES]


def test_exported_tree_gives_the_same_gemm_latency_as_the_original(tmp_path: Path, wheel_systems: Path) -> None:
    systems = wheel_systems
    wh = Warehouse(tmp_path / "wh")
    assert ingest([str(systems / "data" / SLICE)], wh).new_batches == 1
    result = CliRunner().invoke(app, ["export", "aic", str(tmp_path / "out"), "--warehouse", str(wh.root), "--json"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    folder = out / "data" / SLICE
    original = pl.read_parquet(systems / "data" / SLICE / "gemm_perf.parquet")
    exported = pl.read_parquet(folder / "gemm_perf.parquet")
    assert json.loads(result.stdout)["rows"] == exported.height == original.height
    assert exported.columns == original.columns
    assert (folder / "collection_meta.yaml").read_bytes() == (systems / "data" / SLICE / "collection_meta.yaml").read_bytes()
    assert (out / "h200_sxm.yaml").read_bytes() == (systems / "h200_sxm.yaml").read_bytes()  # the loader's spec
    expected = gemm_latencies(systems)
    assert gemm_latencies(out) == pytest.approx(expected, rel=1e-12)
    # Control: the loader really reads the exported files (a copy with doubled latency doubles the answer;
    # a new root, because the loader caches per systems root).
    doubled = tmp_path / "doubled"
    shutil.copytree(out, doubled)
    exported.with_columns(pl.col("latency") * 2).write_parquet(doubled / "data" / SLICE / "gemm_perf.parquet")
    assert gemm_latencies(doubled) == pytest.approx([2 * v for v in expected], rel=1e-9)


def test_export_keeps_reuse_declarations_and_restores_row_versions(tmp_path: Path, shared_tree: Path) -> None:
    src = shared_tree / "h200_sxm" / "gemm" / "vllm" / "0.22.0"
    wh = Warehouse(tmp_path / "wh")
    ingest([str(src)], wh)
    export_aic(wh, tmp_path / "out")
    folder = tmp_path / "out" / "data" / "h200_sxm" / "gemm" / "vllm" / "0.22.0"
    assert (folder / "reuse.yaml").read_bytes() == (src / "reuse.yaml").read_bytes()
    original = pl.read_parquet(src / "gemm_perf.parquet")
    assert pl.read_parquet(folder / "gemm_perf.parquet")["version"].to_list() == original["version"].to_list()


def test_a_folder_the_latest_batch_changed_gets_a_generated_collection_meta(tmp_path: Path, shared_tree: Path) -> None:
    src = shared_tree / "h200_sxm" / "gemm" / "vllm" / "0.22.0"
    wh = Warehouse(tmp_path / "wh")
    ingest([str(src)], wh)
    changed = tmp_path / "tree" / "h200_sxm" / "gemm" / "vllm" / "0.22.0"
    changed.mkdir(parents=True)
    pl.read_parquet(src / "gemm_perf.parquet").head(10).write_parquet(changed / "gemm_perf.parquet")  # no sidecars
    assert ingest([str(changed)], wh).new_batches == 1
    export_aic(wh, tmp_path / "out")
    folder = tmp_path / "out" / "data" / "h200_sxm" / "gemm" / "vllm" / "0.22.0"
    meta = yaml.safe_load((folder / "collection_meta.yaml").read_text())
    assert meta["tables"] == {"gemm_perf": {"status": "complete", "rows": 10}}
    assert not (folder / "reuse.yaml").exists()  # the batch that now makes the folder declares no reuse
    assert pl.read_parquet(folder / "gemm_perf.parquet").equals(pl.read_parquet(changed / "gemm_perf.parquet"))


def test_export_refuses_a_non_empty_target_and_an_empty_warehouse(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    with pytest.raises(ExportError, match="exists and is not empty"):
        export_aic(Warehouse(tmp_path / "wh"), tmp_path / "out")
    with pytest.raises(ExportError, match="holds no curated rows"):
        export_aic(Warehouse(tmp_path / "wh"), tmp_path / "fresh")
    bad = CliRunner().invoke(app, ["export", "tarball", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "unknown layout 'tarball'" in bad.output


def test_public_columns_drop_lineage_and_millisecond_twins() -> None:
    curated = pl.DataFrame({"framework": ["vllm"], "version": ["0.24.0"], "row_version": ["0.24.0.dev3"], "device": ["H200"],
                            "op_name": ["gemm"], "kernel_source": ["k"], "gemm_dtype": ["fp8"], "m": [1], "n": [2], "k": [3],
                            "latency": [0.5], "system": ["h200_sxm"], "family": ["gemm"], "backend": ["vllm"],
                            "batch_id": ["b"], "source_file": ["f"], "source_row": [0], "note": ["x"]})
    out = public_columns(curated, "gemm_perf")
    assert out.columns == ["framework", "version", "device", "op_name", "kernel_source", "gemm_dtype", "m", "n", "k",
                           "latency", "note"]
    assert out["version"].to_list() == ["0.24.0.dev3"]
