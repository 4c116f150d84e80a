"""--set parsing and precedence: file < --set < promoted flags."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfledger.generator.errors import GeneratorError, UsageError
from perfledger.generator.overrides import apply_overrides, parse_override

from .conftest import minimal, render


@pytest.mark.parametrize("text, path, value", [
    ("WorkerConfig.decode_workers=2", ["WorkerConfig", "decode_workers"], 2),
    ("Workers.prefill.kv_cache_free_gpu_memory_fraction=0.8", ["Workers", "prefill", "kv_cache_free_gpu_memory_fraction"], 0.8),
    ("K8sConfig.k8s_engine_mode=inline", ["K8sConfig", "k8s_engine_mode"], "inline"),
    ("rule=benchmark", ["rule"], "benchmark"),
    ("Workers.agg.extra_cli_args=[\"--a\",\"b\"]", ["Workers", "agg", "extra_cli_args"], ["--a", "b"]),
    ("ModelConfig.is_moe=true", ["ModelConfig", "is_moe"], True),
    ("ServiceConfig.served_model_name=a=b", ["ServiceConfig", "served_model_name"], "a=b"),
])
def test_parse_override(text, path, value):
    assert parse_override(text) == (path, value)


@pytest.mark.parametrize("text", ["ServiceConfig.port", "=3", "a..b=1", "a b=1"])
def test_malformed_override_is_a_usage_error(text):
    with pytest.raises(UsageError):
        parse_override(text)


def test_python_yaml_tags_are_refused():
    with pytest.raises(GeneratorError, match="invalid YAML"):
        parse_override("ServiceConfig.model_path=!!python/object/apply:os.system ['id']")


def test_override_into_scalar_names_the_path():
    with pytest.raises(GeneratorError) as info:
        apply_overrides({"ServiceConfig": {"port": 1}}, ["ServiceConfig.port.x=1"])
    assert info.value.where == "ServiceConfig.port"


def test_command_line_wins_over_file_and_promoted_flags_win_over_set():
    doc = minimal("vllm", ServiceConfig={"model_path": "org/model", "port": 8000})
    out = render(doc, ["ServiceConfig.port=9000", "backend=sglang"], backend="trtllm")
    cfg = out.files["generator_config.yaml"]
    assert "port: 9000" in cfg and "backend: trtllm" in cfg


@settings(max_examples=30, deadline=None)  # renders a whole deployment per example: no per-example deadline
@given(st.integers(min_value=1, max_value=65535))
def test_set_port_reaches_the_frontend(port):
    files = render(minimal(), [f"ServiceConfig.port={port}"]).files
    assert f"--http-port {port} " in files["run_0.sh"]
