"""The ops a model needs (ledger/matrix/needs.py): config dims, per-mode derivation."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfledger.estimator.models.config_expr import ConfigExprError
from perfledger.ledger.matrix.needs import (
    NeedsError,
    derive_needs,
    load_config,
    load_needs,
    model_dims,
)
from perfledger.ledger.specs import LaneSpecError, parse_spec

DOC = load_needs()


def dims(model: str) -> dict:
    config, source = load_config(model)
    return model_dims(config, source, DOC["dims"])


def test_dims_read_the_nested_text_config_and_defaults():
    k3 = dims("moonshotai/Kimi-K3")  # KimiK3ForConditionalGeneration nests the LM under text_config
    assert (k3["hidden"], k3["moe_hidden"], k3["experts"], k3["topk"], k3["heads"]) == (7168, 3584, 896, 16, 96)
    v3 = dims("deepseek-ai/DeepSeek-V3")
    assert (v3["experts"], v3["topk"], v3["moe_hidden"], v3["head_dim"]) == (256, 8, 7168, 7168 // 128)
    with pytest.raises(ConfigExprError, match=r"cfg.json: none of \['nope'\] present \(needs.yaml dims.x\)"):
        model_dims({"hidden_size": 1}, "cfg.json", {"x": ["nope"]})


def names(needs, phase=None):
    return [n.name for n in needs if phase is None or n.phase == phase]


def test_attention_kind_follows_the_architecture():
    qwen = derive_needs("Qwen3MoeForCausalLM", dims("Qwen/Qwen3-235B-A22B"), {}, "agg")
    assert {"context_attention", "generation_attention"} <= set(names(qwen))
    assert not any(n.startswith("mla_") for n in names(qwen))
    k3 = derive_needs("KimiK3ForConditionalGeneration", dims("moonshotai/Kimi-K3"), {"moe": "w4a16_mxfp4"}, "agg")
    assert names(k3, "context")[:3] == ["qkv_a_proj", "mla_context_attention", "mla_gate_proj"]
    assert {"kda_scan", "kda_decode", "moe_latent_down", "moe_latent_up", "gate_up_proj"} <= set(names(k3))
    v3 = derive_needs("DeepseekV3ForCausalLM", dims("deepseek-ai/DeepSeek-V3"), {"gemm": "fp8_block"}, "agg")
    assert "mla_gate_proj" not in names(v3)  # only K3's MLA layers gate their output
    moe = next(n for n in k3 if n.name == "moe_experts")
    assert dict(moe.query)["quant"] == "w4a16_mxfp4" and dict(moe.query)["hidden"] == 3584


def test_the_mode_decides_the_comm_ops():
    d = dims("Qwen/Qwen3-235B-A22B")
    agg, disagg = (derive_needs("Qwen3MoeForCausalLM", d, {}, m) for m in ("agg", "disagg"))
    assert "tp_allreduce" in names(agg, "generation") and "moe_dispatch_alltoall" not in names(agg)
    assert names(disagg, "generation")[-2:] == ["moe_dispatch_alltoall", "lm_head"]
    a2a = dict(next(n for n in disagg if n.name == "moe_dispatch_alltoall").query)
    assert a2a == {"quant": "half", "num_gpus": 8, "elements": 64 * 8 * 4096, "op": "alltoall"}


def test_unknown_architecture_and_quant_label_are_clear_errors():
    with pytest.raises(NeedsError, match="architecture 'NopeForCausalLM' not in architectures"):
        derive_needs("NopeForCausalLM", {}, {}, "agg")
    doc = {**DOC, "components": {**DOC["components"], "lm_head": [
        {"name": "lm_head", "op": "gemm", "query": {"quant": "quant.lm"}}]}}
    with pytest.raises(NeedsError, match=r"components.lm_head\[0\].query.quant: no quant label 'lm'"):
        derive_needs("Qwen3ForCausalLM", dims("Qwen/Qwen3-32B"), {}, "agg", doc)


def test_spec_matrix_block_is_validated():
    base = {"model": "m/x", "architecture": "A", "systems": ["h200_sxm"], "lanes": []}
    with pytest.raises(LaneSpecError, match="s.yaml: matrix.quant: expected a mapping role -> quant label"):
        parse_spec({**base, "matrix": {"quant": ["fp8"]}}, Path("s.yaml"))
    with pytest.raises(LaneSpecError, match="s.yaml: matrix.derive: expected true or false"):
        parse_spec({**base, "matrix": {"derive": "yes"}}, Path("s.yaml"))


def test_an_unknown_architecture_stops_the_build_naming_needs_yaml(tmp_path):
    import yaml

    from perfledger.ledger.matrix.build import model_needs
    from perfledger.ledger.specs import find_spec

    raw = {**yaml.safe_load(find_spec("qwen3-235b-a22b").path.read_text()), "architecture": "NopeForCausalLM"}
    with pytest.raises(NeedsError, match="needs.yaml: architecture 'NopeForCausalLM' not in architectures"):
        model_needs(parse_spec(raw, tmp_path / "odd.yaml"), ("agg",))
