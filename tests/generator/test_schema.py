"""Input contract: unknown keys, types, limits, required-after-defaults, computed string defaults."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfledger.generator.defaults import apply_defaults
from perfledger.generator.errors import GeneratorError
from perfledger.generator.schema import check_document, load_schema

from .conftest import minimal, render

RUNTIME = {"runtime_image": "img:1", "backend_version": "0.20.1", "dynamo_version": "1.2.0"}


@pytest.mark.parametrize("patch, where, hint", [
    ({"ServiceConfig": {"model_path": "m", "modle_name": "x"}}, "ServiceConfig.modle_name", "did you mean"),
    ({"K8sConfg": {}}, "K8sConfg", "did you mean 'K8sConfig'"),
    ({"Workers": {"decod": {}}}, "Workers.decod", "did you mean 'decode'"),
    ({"Workers": {"agg": {"max_batch_sise": 8}}}, "Workers.agg.max_batch_sise", "did you mean 'max_batch_size'"),
    ({"Params": {"x": 1}}, "Params", "not supported: raw deep-merge"),
    ({"SflowConfig": {}}, "SflowConfig", "not supported: the Slurm sflow target"),
])
def test_unknown_keys_are_rejected_with_path_and_suggestion(patch, where, hint):
    doc = {**minimal(), **patch}
    with pytest.raises(GeneratorError) as info:
        check_document(doc, "in.yaml")
    assert info.value.where == where and hint in info.value.message


@pytest.mark.parametrize("patch, where", [
    ({"ServiceConfig": {"model_path": "m", "port": "8000"}}, "ServiceConfig.port"),
    ({"ServiceConfig": {"model_path": "m", "port": 70000}}, "ServiceConfig.port"),
    ({"ServiceConfig": {"model_path": 1.5}}, "ServiceConfig.model_path"),
    ({"ServiceConfig": {"model_path": None}}, "ServiceConfig.model_path"),
    ({"ServiceConfig": {"model_path": "a\x00b"}}, "ServiceConfig.model_path"),
    ({"K8sConfig": {"k8s_namespace": "Bad_NS"}}, "K8sConfig.k8s_namespace"),
    ({"K8sConfig": {"k8s_envs": {"1BAD": "x"}}}, "K8sConfig.k8s_envs.1BAD"),
    ({"DynConfig": {"transport": "tcp"}}, "DynConfig.transport"),
    ({"Workers": {"agg": {"tensor_parallel_size": True}}}, "Workers.agg.tensor_parallel_size"),
    ({"Workers": {"agg": {"cuda_graph_batch_sizes": [1, 2, 2]}}}, "Workers.agg.cuda_graph_batch_sizes"),
    ({"rule": "../../etc"}, "rule"),
    ({"version": 0.2}, "version"),
])
def test_bad_values_name_their_key(patch, where):
    doc = {**minimal(), **patch}
    with pytest.raises(GeneratorError) as info:
        check_document(doc, "in.yaml")
    assert info.value.where == where


def test_document_must_be_a_mapping():
    with pytest.raises(GeneratorError, match="must be a mapping"):
        check_document(["a"], "in.yaml")


def test_required_is_checked_after_computed_defaults():
    """Reference defect 3: served_model_name was mandatory on one path; here it is computed."""
    out = apply_defaults(minimal(), RUNTIME)
    assert out["ServiceConfig"]["served_model_name"] == "model"
    assert out["K8sConfig"]["name_prefix"] == "model"
    assert out["K8sConfig"]["k8s_image"] == "img:1"


def test_missing_required_names_the_root_key():
    doc = minimal()
    del doc["ServiceConfig"]["model_path"]
    with pytest.raises(GeneratorError) as info:
        apply_defaults(doc, RUNTIME)
    assert info.value.where == "ServiceConfig.model_path"


def test_string_defaults_stay_strings():
    """Reference defect 1: bare-word defaults (namespace dynamo, transport, engine mode) became None."""
    resolved = render(minimal()).files["generator_config.yaml"]
    for line in ("k8s_namespace: dynamo", "transport: nixl", "k8s_engine_mode: configmap", "mode: agg"):
        assert line in resolved


def test_every_schema_default_passes_its_own_check():
    schema = load_schema()
    for section, fields in schema.sections.items():
        for key, spec in fields.items():
            assert "default" not in spec or spec["default"] is not None, f"{section}.{key}"


@pytest.mark.parametrize("key, value", [("extra_engine_args", {"a": 1}), ("cache_transceiver_backend", "UCX")])
def test_trtllm_only_worker_keys_are_refused_elsewhere(key, value):
    d = minimal("vllm")
    d["Workers"]["agg"][key] = value
    with pytest.raises(GeneratorError) as info:
        render(d)
    assert info.value.where == f"Workers.agg.{key}" and "only used by trtllm" in info.value.message


NON_STRING_FIELDS = sorted(
    [(f"{s}.{k}", (s, k)) for s, fields in load_schema().sections.items() for k, spec in fields.items()
     if spec["type"] != "str"] +
    [(f"Workers.agg.{k}", ("Workers", "agg", k)) for k, spec in load_schema().roles.items()
     if spec["type"] not in ("str", "list_str")])


@pytest.mark.parametrize("path, parts", NON_STRING_FIELDS, ids=[p for p, _ in NON_STRING_FIELDS])
@settings(max_examples=10, deadline=None)
@given(text=st.text(min_size=1, max_size=20))
def test_strings_in_typed_fields_are_rejected_with_their_path(path, parts, text):
    d = minimal()
    node = d
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = text
    with pytest.raises(GeneratorError) as info:
        check_document(d, "in.yaml")
    assert info.value.where == path
