"""Runtime resolution, per-version flag data, and the allow-lists the mapping is checked against."""

import pytest

from perfledger.generator.allowlist import allowed, check_flags
from perfledger.generator.errors import GeneratorError
from perfledger.generator.mapping import BACKENDS, load_mapping, parse_mapping
from perfledger.generator.versions import resolve_runtime, runtime_matrix
from perfledger.generator.yamlio import load_package_yaml

from .conftest import minimal, render

MAPPING = load_mapping()


@pytest.mark.parametrize("backend", BACKENDS)
def test_allowlists_cover_exactly_the_versions_with_flag_data(backend):
    data = load_package_yaml(f"allowlists/{backend}.yaml")
    assert list(data["versions"]) == MAPPING.backends[backend]["versions"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_mapped_flag_is_allowed_at_every_version_it_is_emitted(backend):
    """The mapping's since/until/renamed_to data against the independent per-version allow-lists."""
    for version in MAPPING.backends[backend]["versions"]:
        ok = allowed(backend, version)
        for key, param in MAPPING.params.items():
            found = param.flag_for(backend, version)
            if found:
                assert found[0] in ok, f"{key} -> {found[0]} not accepted by {backend} {version}"


@pytest.mark.parametrize("version, path", [
    ("1.0.0rc3", "build_config.max_batch_size"), ("1.2.0rc3", "build_config.max_batch_size"),
    ("1.2.0rc5", "max_batch_size"), ("1.3.0rc23", "max_batch_size"),
])
def test_trtllm_limit_placement_follows_version(version, path):
    assert MAPPING.params["max_batch_size"].flag_for("trtllm", version)[0] == path


def test_kv_cache_dtype_moves_into_kv_cache_config():
    param = MAPPING.params["kv_cache_dtype"]
    assert param.flag_for("trtllm", "1.0.0rc3")[0] == "kv_cache_dtype"
    assert param.flag_for("trtllm", "1.0.0rc4")[0] == "kv_cache_config.dtype"


def test_flag_outside_its_span_is_not_emitted_and_the_user_is_warned():
    d = minimal("vllm", version="0.10.2", generator_dynamo_version="0.5.0",
                Workers={"agg": {"tensor_parallel_size": 1, "data_parallel_size": 2}})
    out = render(d)
    assert "--data-parallel-size" not in out.files["cli_args_agg.yaml"]
    assert any("Workers.agg.data_parallel_size has no vllm 0.10.2 flag" in w for w in out.warnings)


def test_sglang_moe_dense_tp_is_never_emitted():
    assert not MAPPING.params["moe_tensor_parallel_size"].flags["sglang"]
    assert "--moe-dense-tp-size" not in allowed("sglang", "0.5.11")


def test_allowlist_check_fails_closed():
    with pytest.raises(GeneratorError, match="--moe-dense-tp-size"):
        check_flags("sglang", "0.5.11", ["--tensor-parallel-size", "2", "--moe-dense-tp-size", "2"], None, "Workers.agg")
    with pytest.raises(GeneratorError, match="build_config.max_batch_size"):
        check_flags("trtllm", "1.3.0rc23", [], {"build_config": {"max_batch_size": 8}}, "Workers.agg")


def test_image_and_flag_data_follow_one_runtime():
    """Reference defect 6: template version and image tag disagreed; here both come from one resolution."""
    rt = resolve_runtime("trtllm", None, "1.0.0", "dynamo", MAPPING.backends["trtllm"]["versions"])
    assert rt.version == rt.data_version == "1.3.0rc14" and rt.image.endswith("tensorrtllm-runtime:1.0.0")
    explicit = resolve_runtime("vllm", "0.14.1", None, "dynamo", MAPPING.backends["vllm"]["versions"])
    assert explicit.dynamo_version == "0.8.0" and not explicit.warnings


def test_version_without_exact_data_warns_loudly_which_data_is_used():
    rt = resolve_runtime("vllm", None, "1.3.0", "dynamo", MAPPING.backends["vllm"]["versions"])
    assert rt.version == "0.24.0" and rt.data_version == "0.20.1"
    assert rt.warnings == ("WARNING: no exact flag data for vllm 0.24.0; using the rules of vllm 0.20.1 "
                           "(backend_config_mapping.yaml)",)


def test_every_matrix_pin_resolves():
    for dynamo, pins in runtime_matrix()["dynamo"].items():
        for backend, version in pins.items():
            resolve_runtime(backend, version, dynamo, "dynamo", MAPPING.backends[backend]["versions"])


def test_mismatched_explicit_versions_warn_and_explicit_image_tag_is_checked():
    rt = resolve_runtime("vllm", "0.12.0", "1.2.0", "dynamo", MAPPING.backends["vllm"]["versions"])
    assert "Dynamo 1.2.0 ships vllm 0.20.1, not 0.12.0" in rt.warnings[0]
    d = minimal("trtllm", K8sConfig={"k8s_image": "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.3.0"},
                generator_dynamo_version="1.0.0")
    assert any("does not carry version 1.0.0" in w for w in render(d).warnings)


@pytest.mark.parametrize("backend, version, dynamo, fragment", [
    ("vllm", None, "9.9.9", "unsupported Dynamo release"),
    ("vllm", "0.1.0", None, "older than every version"),
    ("vllm", "latest", None, "not a version"),
])
def test_bad_versions(backend, version, dynamo, fragment):
    with pytest.raises(GeneratorError, match=fragment):
        resolve_runtime(backend, version, dynamo, "dynamo", MAPPING.backends[backend]["versions"])


def test_llmd_refuses_dynamo_only_backend():
    with pytest.raises(GeneratorError, match="supports backends vllm, sglang; trtllm is Dynamo-only"):
        render(minimal("trtllm"), target="llm-d-helm")


def test_bad_mapping_entries_name_file_and_parameter():
    good = load_package_yaml("backend_config_mapping.yaml")
    bad = {**good, "parameters": [*good["parameters"], {"key": "x", "type": "int", "vllm": {"flag": "--x", "kind": "json"}}]}
    with pytest.raises(GeneratorError, match=r"parameters\[\d+\]\.vllm"):
        parse_mapping(bad)
