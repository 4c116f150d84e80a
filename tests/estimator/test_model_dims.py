"""Typed model dims (estimator/models/config.py `ModelDims`) and the object plans and memory read (`PricedModel`)."""

from dataclasses import fields
from pathlib import Path

import pytest

from perfledger.estimator.errors import EstimatorError
from perfledger.estimator.models.config import MODELS_YAML, ModelConfig, ModelDims, catalog, model_dims
from perfledger.estimator.models.plans.kimi_k3 import K3Dims
from perfledger.estimator.models.plans.registry import load_model, priced_model


def test_model_dims_fields_and_the_models_yaml_dims_map_are_in_step():
    """Adding a dim is one models.yaml line plus one ModelDims field; this says which side lacks it."""
    declared, mapped = {f.name for f in fields(ModelDims)}, set(catalog()["dims"])
    assert not mapped - declared, f"{MODELS_YAML.name} dims without a ModelDims field: {sorted(mapped - declared)}"
    assert not declared - mapped, f"ModelDims fields without a {MODELS_YAML.name} dims entry: {sorted(declared - mapped)}"


def test_the_reader_types_a_nested_config_with_defaults():
    """text_config wins over the top level, absent optional dims are 0, head_dim falls back to hidden // heads."""
    text = {"hidden_size": 1024, "num_attention_heads": 16, "num_hidden_layers": 4, "vocab_size": 1000,
            "n_routed_experts": 8, "num_experts_per_tok": 2}
    dims = model_dims(ModelConfig("cfg.json", Path("cfg.json"), {"text_config": text, "hidden_size": 1}, {}))
    assert dims == ModelDims(hidden=1024, heads=16, kv_heads=16, head_dim=64, layers=4, vocab=1000, inter=0, experts=8,
                             topk=2, moe_inter=0, shared=0, q_lora=0, kv_lora=0, rope_dim=0, nope_dim=0, v_head_dim=0,
                             index_heads=0, index_head_dim=0)


def test_a_priced_model_carries_typed_dims_family_and_plan_dims():
    k3 = load_model("moonshotai/Kimi-K3")
    assert isinstance(k3.dims, ModelDims) and isinstance(k3.plan_dims, K3Dims) and k3.family["kind"] == "kimi_k3"
    assert k3.plan_dims.kda_layers + k3.plan_dims.mla_layers == k3.dims.layers
    names = k3.as_mapping()
    assert names["kda_layers"] == k3.plan_dims.kda_layers and names["hidden"] == k3.dims.hidden
    assert names["shared_bf16"] is k3.unquantized.shared and "kind" not in names  # the family stays out of memory.yaml


def test_priced_model_reads_a_model_no_plan_prices_but_the_static_estimate_refuses_it():
    """An architecture without a layer plan: no family and no plan dims, and load_model names the gap; DeepSeek-V3
    (priced since the deepseek plan) loads with its family."""
    raw = {"hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1, "vocab_size": 4}
    other = priced_model(ModelConfig("x", Path("x.json"), {"architectures": ["NoPlanForCausalLM"], **raw}, {}))
    assert other.family == {} and other.plan_dims is None and other.dims.head_dim == 4
    with pytest.raises(EstimatorError, match="architecture 'NoPlanForCausalLM' not in models.yaml"):
        load_model(ModelConfig("x", Path("x.json"), {"architectures": ["NoPlanForCausalLM"]}, {}))
    v3 = load_model(ModelConfig("v3", Path("v3.json"), {"architectures": ["DeepseekV3ForCausalLM"], **raw}, {}))
    assert v3.family["kind"] == "deepseek" and v3.plan_dims is None
