"""The spec expression language (estimator/models/config_expr.py) shared by needs.yaml and memory.yaml."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfledger.estimator.models.config import config_dims
from perfledger.estimator.models.config_expr import ConfigExprError, evaluate


@given(a=st.integers(1, 10**6), b=st.integers(1, 10**4), c=st.integers(0, 64))
def test_expressions_match_python_integer_arithmetic(a, b, c):
    names = {"a": a, "b": b, "c": c}
    assert evaluate("(a // b + 2 * max(c // b, 1)) * c", names, "w") == (a // b + 2 * max(c // b, 1)) * c
    assert evaluate("a > b and (c == 0 or a != b)", names, "w") == (a > b and (c == 0 or a != b))


@pytest.mark.parametrize("expr, message", [
    ("hiddn * 2", "w: unknown name 'hiddn' in 'hiddn * 2'"),
    ("__import__('os')", "w: unsupported expression"),
    ("a.real", "w: unsupported expression"),
    ("a +", "w: not an expression: 'a +'"),
])
def test_bad_expressions_name_the_key(expr, message):
    with pytest.raises(ConfigExprError, match=re.escape(message)):
        evaluate(expr, {"a": 1}, "w")




def test_config_dims_take_the_first_present_key_then_the_default():
    cfg = {"text_config": {"hidden_size": 64, "num_attention_heads": 8}, "hidden_size": 1, "vocab_size": 10}
    fields = {"hidden": ["hidden_size"], "heads": ["num_attention_heads"], "head_dim": ["head_dim", 0],
              "vocab": ["vocab_size"], "experts": ["num_experts", "n_routed_experts", 0]}
    dims = config_dims(cfg, "cfg.json", fields, "spec.yaml")
    assert dims == {"hidden": 64, "heads": 8, "head_dim": 8, "vocab": 10, "experts": 0}
    with pytest.raises(ConfigExprError, match=re.escape("cfg.json: none of ['nope'] present (spec.yaml dims.x)")):
        config_dims(cfg, "cfg.json", {"x": ["nope"]}, "spec.yaml")
