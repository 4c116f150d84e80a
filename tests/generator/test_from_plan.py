"""A `perfledger plan` row as a unified deployment YAML: workers × replicas, layouts per role, rendered by the generator."""

from __future__ import annotations

import pytest

from perfledger.generator.api import render_document
from perfledger.generator.from_plan import deployment

SIDE = {"tp": 2, "pp": 1, "dp": 1, "moe_tp": 1, "moe_ep": 1, "batch": 44}
DISAGG = {"ttft_ms": 778.117, "tpot_ms": 18.461, "replicas": 2, "prefill": {**SIDE, "workers": 2, "tp": 1, "batch": 1},
          "decode": {**SIDE, "workers": 1}}


def test_disagg_row_repeats_its_replica_to_fill_the_budget():
    doc = deployment(DISAGG, mode="disagg", model="Qwen/Qwen3-32B", backend="vllm", isl=4000, osl=500)
    assert doc["WorkerConfig"] == {"prefill_workers": 4, "decode_workers": 2}
    assert doc["Workers"]["decode"] == {"tensor_parallel_size": 2, "pipeline_parallel_size": 1, "max_batch_size": 44}
    rendered = render_document(doc, "plan disagg top1")
    assert rendered.mode == "disagg" and "run_0.sh" in rendered.files
    assert rendered.files["run_0.sh"].count("--disaggregation-mode decode") == 2


def test_moe_attention_dp_side_names_its_widths():
    row = {"ttft_ms": 300.0, "tpot_ms": 20.0, "replicas": 1, **SIDE, "tp": 1, "dp": 8, "moe_ep": 8}
    worker = deployment(row, mode="agg", model="Qwen/Qwen3-235B-A22B", backend="sglang", isl=1000, osl=100,
                        is_moe=True)["Workers"]["agg"]
    assert worker["enable_attention_dp"] and worker["data_parallel_size"] == 8 and worker["moe_expert_parallel_size"] == 8


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="agg or disagg"):
        deployment(DISAGG, mode="afd", model="m", backend="vllm", isl=1, osl=1)


def test_a_cp_row_is_not_rendered_and_clears_what_an_earlier_row_left(tmp_path):
    """A cp > 1 row has no flag in the mapping: no folder is made for it, and the artifacts an earlier answer
    rendered at the same place are removed, so they cannot pass for this row's."""
    from pathlib import Path

    from perfledger.generator.from_plan import render_row

    kw = dict(mode="disagg", model="Qwen/Qwen3-32B", backend="vllm", isl=4000, osl=500)
    cp_row = {**DISAGG, "prefill": {**DISAGG["prefill"], "cp": 2}}
    assert render_row(tmp_path, Path("disagg/top1"), cp_row, **kw)[0] == []
    assert not (tmp_path / "disagg").exists()
    files, _ = render_row(tmp_path, Path("disagg/top1"), DISAGG, **kw)
    assert "run_0.sh" in files and (tmp_path / "disagg/top1/run_0.sh").is_file()
    files, said = render_row(tmp_path, Path("disagg/top1"), cp_row, **kw)
    assert files == [] and "not rendered" in said[0]
    assert not (tmp_path / "disagg/top1/run_0.sh").exists()
