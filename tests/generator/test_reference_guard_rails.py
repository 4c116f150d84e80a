"""Regression tests for the reference's guard rails and value translations (generator-reference.md §1.8, §3).

Each test names the failure it guards against; goldens show the same output, these say why it matters.
"""

import pytest
import yaml

from perfledger.generator.api import build_document
from perfledger.generator.errors import GeneratorError
from perfledger.generator.resolve import resolve
from perfledger.generator.scripts import bench_concurrency

from .conftest import example, minimal, render


def _args(files, role):
    return yaml.safe_load(files[f"cli_args_{role}.yaml"])["args"]


def _after(args, flag):
    return args[args.index(flag) + 1] if flag in args else None


@pytest.mark.parametrize("backend, dtype, expected", [
    ("vllm", "bfloat16", "auto"), ("vllm", "fp8", "fp8"),
    ("sglang", "bfloat16", "auto"), ("sglang", "fp8", "fp8_e4m3"),
])
def test_kv_cache_dtype_is_spelled_per_backend(backend, dtype, expected):
    args = _args(render(minimal(backend), [f"Workers.agg.kv_cache_dtype={dtype}"]).files, "agg")
    assert _after(args, "--kv-cache-dtype") == expected


def test_trtllm_kv_dtype_translation_reaches_the_engine_file():
    files = render(minimal("trtllm"), ["Workers.agg.kv_cache_dtype=bfloat16"]).files
    assert yaml.safe_load(files["agg_config.yaml"])["kv_cache_config"]["dtype"] == "auto"


@pytest.mark.parametrize("padding, emitted", [(False, True), (True, False)])
def test_sglang_cuda_graph_padding_is_inverted(padding, emitted):
    args = _args(render(minimal("sglang"), [f"Workers.agg.cuda_graph_enable_padding={str(padding).lower()}"]).files,
                 "agg")
    assert ("--disable-cuda-graph-padding" in args) is emitted


def test_sglang_chunked_prefill_size_comes_from_the_token_budget():
    files = render(minimal("sglang", "disagg"), ["Workers.prefill.enable_chunked_prefill=true"]).files
    prefill = _args(files, "prefill")
    assert _after(prefill, "--chunked-prefill-size") == "5500"  # production: isl 4000 + 1500
    off = render(minimal("sglang"), ["Workers.agg.enable_chunked_prefill=false"]).files
    assert _after(_args(off, "agg"), "--chunked-prefill-size") == "-1"


def test_vllm_cudagraph_sizes_are_separate_words_not_a_comma_list():
    """Guard rail: vLLM rejects `--cudagraph-capture-sizes 1,2,4`; it needs space-separated values."""
    args = _args(render(minimal("vllm"), ["Workers.agg.cuda_graph_batch_sizes=[1,2,4]"]).files, "agg")
    i = args.index("--cudagraph-capture-sizes")
    assert args[i + 1:i + 4] == ["1", "2", "4"]


@pytest.mark.parametrize("target", ["dynamo", "llm-d-helm"])
def test_vllm_disagg_always_carries_a_kv_transfer_config(target):
    files = render(example("vllm_disagg"), target=target).files
    for role in ("prefill", "decode"):
        assert "NixlConnector" in (_after(_args(files, role), "--kv-transfer-config") or "")
    assert "--kv-transfer-config" not in _args(render(example("vllm_agg"), target=target).files, "agg")


@pytest.mark.parametrize("version, expected", [("0.5.4.post3", None), ("0.5.6.post2", "nixl"), ("0.5.11", "nixl")])
def test_sglang_disagg_names_its_transfer_backend_from_0_5_6_post2(version, expected):
    files = render(example("sglang_disagg"), version=version).files
    for role in ("prefill", "decode"):
        assert _after(_args(files, role), "--disaggregation-transfer-backend") == expected


def test_pvc_is_mounted_on_workers_only():
    files = render(example("vllm_disagg"), ["K8sConfig.k8s_pvc_name=model-cache"]).files
    dgd = [d for d in yaml.safe_load_all(files["k8s_deploy.yaml"]) if d["kind"] == "DynamoGraphDeployment"][0]
    services = dgd["spec"]["services"]
    assert dgd["spec"]["pvcs"] == [{"name": "model-cache", "create": False}]
    assert "volumeMounts" not in services["Frontend"]
    for name in ("VllmPrefillWorker", "VllmDecodeWorker"):
        assert services[name]["volumeMounts"] == [{"name": "model-cache", "mountPoint": "/model-cache"}]


@pytest.mark.parametrize("tokens_per_block, isl", [(32, 4000), (64, 4001), (48, 777)])
def test_trtllm_token_budget_is_block_aligned(tokens_per_block, isl):
    """Guard rail: the engine asserts max_num_tokens % tokens_per_block == 0."""
    files = render(minimal("trtllm", "disagg"), [f"Workers.prefill.tokens_per_block={tokens_per_block}",
                                                 f"SlaConfig.isl={isl}"]).files
    engine = yaml.safe_load(files["prefill_config.yaml"])
    assert engine["max_num_tokens"] % tokens_per_block == 0 and engine["max_num_tokens"] >= isl + 500


@pytest.mark.parametrize("backend, spelling", [("vllm", "mtp"), ("sglang", "NEXTN"), ("trtllm", "MTP")])
def test_spec_decode_type_is_spelled_per_backend(backend, spelling):
    out = render(minimal(backend), ["ModelConfig.nextn=2"])
    files = out.files
    if backend == "trtllm":
        assert yaml.safe_load(files["agg_config.yaml"])["speculative_config"]["decoding_type"] == spelling
    elif backend == "vllm":
        assert f'"method":"{spelling}"' in _after(_args(files, "agg"), "--speculative-config")
    else:
        assert _after(_args(files, "agg"), "--speculative-algorithm") == spelling


def test_bench_sweep_is_the_base_list_plus_the_estimate_and_five_percent_around_it():
    script = render(example("vllm_disagg"), ["BenchConfig.estimated_concurrency=200"]).files["bench_run.sh"]
    assert "1 2 8 16 32 64 128 190 200 210" in " ".join(script.split())


def test_bench_concurrency_is_sorted_and_duplicate_free():
    doc = minimal("vllm", BenchConfig={"concurrency": [128, 1], "estimated_concurrency": 128})
    dep = resolve(build_document(doc, []), "t.yaml").deployment
    assert bench_concurrency(dep) == [1, 122, 128, 134]


def test_llmd_config_section_is_used_not_dropped():
    """Reference defect 4: LlmdConfig was silently dropped on the standalone path."""
    out = render(example("vllm_agg"), ["LlmdConfig.gateway_class=kgateway", "LlmdConfig.model_size=300Gi",
                                       "LlmdConfig.model_uri=pvc://models/qwen"], target="llm-d-helm")
    text = out.files["llm-d-values.yaml"]
    assert "kgateway" in text and "300Gi" in text and "pvc://models/qwen" in text


def test_trtllm_disagg_before_the_kv_transceiver_is_refused():
    """cache_transceiver_config first appears at 1.0.0rc4; older engines cannot disaggregate."""
    with pytest.raises(GeneratorError, match="cache_transceiver_config") as info:
        render(example("trtllm_disagg"), version="1.0.0rc3")
    assert info.value.where == "version"


@pytest.mark.parametrize("version, in_spec", [("1.2.0rc5", False), ("1.3.0rc14", True)])
def test_trtllm_mtp_layers_move_into_speculative_config_at_1_3_0rc14(version, in_spec):
    files = render(minimal("trtllm"), ["ModelConfig.nextn=3"], version=version).files
    spec = yaml.safe_load(files["agg_config.yaml"])["speculative_config"]
    assert ("num_nextn_predict_layers" in spec) is in_spec and spec["decoding_type"] == "MTP"


@pytest.mark.parametrize("version, emitted", [("0.5.9", False), ("0.5.10.post1", True)])
def test_sglang_dp_encoder_flag_only_where_it_exists(version, emitted):
    out = render(example("vllm_agg_encode"), backend="sglang", version=version)
    assert ("--mm-enable-dp-encoder" in _args(out.files, "encode")) is emitted
    warned = any("Workers.encode.enable_encoder_dp has no sglang" in w for w in out.warnings)
    assert warned is not emitted
