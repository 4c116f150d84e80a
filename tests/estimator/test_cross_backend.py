"""Cross-backend fill from the reuse manifest: which frameworks lend which kernels, and the merge order."""

from __future__ import annotations

import polars as pl
import pytest

from estimator.cross_backend import (
    lenders,
    load_manifest,
    manifest_path,
    with_cross_backend,
)
from estimator.sources import TreeSource

GROUPS = (
    {"op_file": "kda_perf.parquet", "kernel_source": "conv", "tier": "shared", "frameworks": ["sglang", "vllm"]},
    {"op_file": "kda_perf.parquet", "kernel_source": "update", "tier": "absence_load_bearing", "frameworks": ["sglang", "vllm"]},
    {"op_file": "kda_perf.parquet", "kernel_source": "scan", "tier": "shared", "frameworks": ["sglang"]},
    {"op_file": "kda_perf.parquet", "kernel_source": "default", "tier": "shared_fallback", "frameworks": ["trtllm", "sglang"]},
    {"op_file": "gdn_perf.parquet", "kernel_source": "conv", "tier": "shared", "frameworks": ["sglang", "vllm"]},
)


def test_lenders_follow_shared_groups_only():
    assert lenders(GROUPS, "kda_perf", "sglang") == {"trtllm": {"default"}, "vllm": {"conv"}}
    assert lenders(GROUPS, "kda_perf", "vllm") == {"sglang": {"conv"}}
    assert lenders(GROUPS, "moe_perf", "vllm") == {}


@pytest.mark.parametrize("text,message", [
    ("groups:\n  - {op_file: kda_perf.parquet, tier: shared, frameworks: [vllm]}\n", r"m.yaml: groups\[0\] lacks kernel_source"),
    ("groups: {}\n", "m.yaml: top-level 'groups' must be a list")])
def test_bad_manifest_names_file_and_group(tmp_path, text, message):
    bad = tmp_path / "m.yaml"
    bad.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_manifest(bad)


def _row(kernel: str, latency: float, batch: int = 1) -> dict:
    return {"kernel_source": kernel, "phase": "context", "d_model": 8, "d_conv": 4, "num_k_heads": 1, "head_k_dim": 2,
            "num_v_heads": 1, "head_v_dim": 2, "batch_size": batch, "seq_len": 1, "latency": latency}


def test_own_rows_win_then_lenders_newest_first_filtered_by_kernel(tmp_path):
    data = tmp_path / "systems" / "data"
    data.mkdir(parents=True)
    (tmp_path / "systems" / "perf_data_reuse_manifest.yaml").write_text(
        "groups:\n  - {op_file: kda_perf.parquet, kernel_source: conv, tier: shared, frameworks: [sglang, vllm]}\n")
    for backend, version, rows in [("vllm", "0.1.dev5", [_row("conv", 9.0), _row("conv", 9.0, 4)]),
                                   ("vllm", "0.2.0", [_row("conv", 2.0), _row("conv", 3.0, 2), _row("scan", 7.0)])]:
        folder = data / "gpu" / "kda" / backend / version
        folder.mkdir(parents=True)
        pl.DataFrame(rows).write_parquet(folder / "kda_perf.parquet")
    source = TreeSource(data)
    assert manifest_path(source) == tmp_path / "systems" / "perf_data_reuse_manifest.yaml"
    own = pl.DataFrame([_row("conv", 1.0)])
    out = with_cross_backend(source, own, "gpu", "sglang", "kda_perf").sort("batch_size")
    assert out.select("batch_size", "latency").rows() == [(1, 1.0), (2, 3.0), (4, 9.0)]
    assert out["_source_version"].to_list()[1:] == ["vllm/0.2.0", "vllm/0.1.dev5"]
    empty = with_cross_backend(source, pl.DataFrame(), "gpu", "sglang", "kda_perf")
    assert sorted(empty["latency"].to_list()) == [2.0, 3.0, 9.0] and "scan" not in empty["kernel_source"].to_list()
