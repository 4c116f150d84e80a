"""The encode role (reference §1.3: Workers.encode, a multimodal encoder worker; TRT-LLM encode_config.yaml)."""

import pytest
import yaml

from perfledger.generator.allowlist import allowed
from perfledger.generator.errors import GeneratorError
from perfledger.generator.mapping import load_mapping
from perfledger.generator.rule_apply import apply_rules
from perfledger.generator.rule_parse import parse_rules
from perfledger.generator.schema import load_schema

from .conftest import example, minimal, render


def _services(files):
    dgd = [d for d in yaml.safe_load_all(files["k8s_deploy.yaml"]) if d["kind"] == "DynamoGraphDeployment"][0]
    return dgd["spec"]["services"]


def _with_encode(backend, mode, **encode):
    doc = minimal(backend, mode)
    doc["Workers"]["encode"] = {"tensor_parallel_size": 1, **encode}
    return doc


@pytest.mark.parametrize("backend, prefix", [("vllm", "Vllm"), ("sglang", "SGLang"), ("trtllm", "TRTLLM")])
@pytest.mark.parametrize("mode", ["agg", "disagg"])
def test_encode_worker_is_rendered_with_its_role_flags(backend, prefix, mode):
    out = render(_with_encode(backend, mode), ["WorkerConfig.encode_workers=3"])
    assert out.mode == mode
    args = yaml.safe_load(out.files["cli_args_encode.yaml"])["args"]
    role_flags = load_mapping().backends[backend]["encode_flags"]
    assert args[4:4 + len(role_flags)] == role_flags
    assert {f for f in role_flags if f.startswith("--")} <= allowed(backend, load_mapping().backends[backend]["versions"][-1])
    assert "--kv-transfer-config" not in args and "prefill" not in args and "decode" not in args
    service = _services(out.files)[f"{prefix}EncodeWorker"]
    assert service["replicas"] == 3 and "subComponentType" not in service
    encode_lines = [line for line in out.files["run_0.sh"].splitlines() if "encode" in line]
    assert "python3 -m dynamo." + backend in " ".join(encode_lines)


def test_trtllm_encode_engine_file_has_no_kv_transceiver():
    files = render(example("trtllm_disagg_encode")).files
    encode, prefill = yaml.safe_load(files["encode_config.yaml"]), yaml.safe_load(files["prefill_config.yaml"])
    assert "cache_transceiver_config" not in encode and prefill["cache_transceiver_config"] == {"backend": "NIXL"}
    assert "encode_config.yaml" in yaml.safe_load_all(files["k8s_deploy.yaml"]).__next__()["data"]


def test_encode_alone_is_refused():
    doc = minimal("vllm")
    doc["Workers"] = {"encode": {"tensor_parallel_size": 1}}
    with pytest.raises(GeneratorError, match="an encode worker needs one of them") as info:
        render(doc)
    assert info.value.where == "Workers"


@pytest.mark.parametrize("target", ["llm-d-helm", "llm-d-kustomize"])
def test_llmd_targets_refuse_encode_naming_the_key(target):
    with pytest.raises(GeneratorError) as info:
        render(example("vllm_agg_encode"), target=target)
    assert info.value.where == "Workers.encode" and "target dynamo" in info.value.message


def test_unscoped_role_rules_apply_to_serving_roles_not_encode():
    schema = load_schema()
    rules = parse_rules("max_batch_size = 7\n", "t.rule", schema)
    doc = {"Workers": {"agg": {}, "encode": {}}}
    out, _ = apply_rules(rules, doc, schema)
    assert out["Workers"] == {"agg": {"max_batch_size": 7}, "encode": {}}


def test_encode_is_a_rule_scope_and_a_known_role():
    schema = load_schema()
    [rule] = parse_rules("[encode] max_batch_size = 2\n", "t.rule", schema)
    assert rule.roles == ("encode",)
    assert schema.spec("Workers.encode.enable_encoder_dp")["type"] == "bool"
