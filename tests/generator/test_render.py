"""Rendered artifacts: valid shell and YAML, expected kinds and fields, names from one place."""

import subprocess

import pytest
import yaml

from perfledger.generator.errors import GeneratorError
from perfledger.generator.explain import explain
from perfledger.generator.shell import render_shell
from perfledger.generator.topology import pack

from .conftest import COMBOS, bash_n, example, minimal, render, shellcheck_path


@pytest.fixture(scope="module")
def rendered():
    return {(name, target): render(example(name), target=target) for name, target in COMBOS}


@pytest.mark.parametrize("name, target", COMBOS)
def test_scripts_pass_bash_n_and_shellcheck(rendered, tmp_path, name, target):
    checker = shellcheck_path()
    scripts = {n: t for n, t in rendered[name, target].files.items() if n.endswith(".sh")}
    assert "bench_run.sh" in scripts and (target != "dynamo" or "run_0.sh" in scripts)
    for file_name, text in scripts.items():
        bash_n(text)
        path = tmp_path / file_name
        path.write_text(text)
        proc = subprocess.run([checker, "-s", "bash", str(path)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"{name}/{target}/{file_name}:\n{proc.stdout}"


EXPECTED_KINDS = {
    "k8s_deploy.yaml": {"DynamoGraphDeployment", "ConfigMap"},
    "k8s_bench.yaml": {"ConfigMap", "Job"},
    "kustomize/decode.yaml": {"Deployment"}, "kustomize/prefill.yaml": {"Deployment"},
    "kustomize/service.yaml": {"Service"}, "kustomize/kustomization.yaml": {"Kustomization"},
}


@pytest.mark.parametrize("name, target", COMBOS)
def test_every_yaml_artifact_parses_with_expected_kinds(rendered, name, target):
    for file_name, text in rendered[name, target].files.items():
        if not file_name.endswith(".yaml"):
            continue
        docs = list(yaml.safe_load_all(text))
        assert docs and all(d is not None for d in docs), file_name
        if file_name in EXPECTED_KINDS:
            assert {d["kind"] for d in docs} <= EXPECTED_KINDS[file_name], file_name


def _dgd(files):
    return [d for d in yaml.safe_load_all(files["k8s_deploy.yaml"]) if d["kind"] == "DynamoGraphDeployment"][0]


def test_dgd_fields_for_disagg():
    files = render(example("vllm_disagg")).files
    dgd = _dgd(files)
    assert dgd["apiVersion"] == "nvidia.com/v1alpha1" and dgd["metadata"]["name"] == "qwen3-32b-disagg"
    services = dgd["spec"]["services"]
    assert set(services) == {"Frontend", "VllmPrefillWorker", "VllmDecodeWorker"}
    decode = services["VllmDecodeWorker"]
    assert decode["componentType"] == "worker" and decode["subComponentType"] == "decode"
    assert decode["replicas"] == 2 and decode["resources"]["limits"]["gpu"] == "2"
    container = decode["extraPodSpec"]["mainContainer"]
    assert container["command"] == ["python3", "-m", "dynamo.vllm"]
    assert container["args"][container["args"].index("--disaggregation-mode") + 1] == "decode"
    assert "volumeMounts" not in services["Frontend"]


def test_trtllm_engine_files_ship_in_a_configmap_and_inline_mode_uses_env():
    files = render(example("trtllm_disagg")).files
    docs = list(yaml.safe_load_all(files["k8s_deploy.yaml"]))
    assert docs[0]["kind"] == "ConfigMap" and set(docs[0]["data"]) == {"prefill_config.yaml", "decode_config.yaml"}
    assert yaml.safe_load(docs[0]["data"]["decode_config.yaml"]) == yaml.safe_load(files["decode_config.yaml"])
    inline = _dgd(render(example("trtllm_agg")).files)["spec"]["services"]["TRTLLMWorker"]
    container = inline["extraPodSpec"]["mainContainer"]
    assert container["command"][:2] == ["bash", "-c"] and "PERFLEDGER_ENGINE_CONFIG" in container["command"][2]
    assert any(e["name"] == "PERFLEDGER_ENGINE_CONFIG" for e in inline["envs"])


def test_trtllm_engine_yaml_content():
    files = render(example("trtllm_disagg")).files
    prefill, decode = yaml.safe_load(files["prefill_config.yaml"]), yaml.safe_load(files["decode_config.yaml"])
    assert prefill["disable_overlap_scheduler"] is True
    assert prefill["max_num_tokens"] % prefill["kv_cache_config"]["tokens_per_block"] == 0
    assert decode["cache_transceiver_config"] == {"backend": "NIXL"}
    assert decode["kv_cache_config"]["dtype"] == "fp8"
    assert decode["speculative_config"] == {"decoding_type": "MTP", "num_nextn_predict_layers": 1}
    old = yaml.safe_load(render(example("trtllm_agg")).files["agg_config.yaml"])
    assert old["build_config"]["max_batch_size"] == 512 and "max_batch_size" not in old
    assert old["print_iter_log"] is True  # extra_engine_args passthrough


def test_names_and_urls_derive_from_name_prefix():
    """Reference defect 2: the bench URL ignored name_prefix."""
    d = example("vllm_agg")
    d["K8sConfig"]["name_prefix"] = "qwen32b"
    files = render(d).files
    assert _dgd(files)["metadata"]["name"] == "qwen32b-agg"
    job = [x for x in yaml.safe_load_all(files["k8s_bench.yaml"]) if x["kind"] == "Job"][0]
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["BENCH_URL"] == "http://qwen32b-agg-frontend.dynamo.svc.cluster.local:8000"
    assert job["metadata"]["namespace"] == "dynamo"


@pytest.mark.parametrize("name, target", COMBOS)
def test_no_none_leaks_into_any_artifact(rendered, name, target):
    """Reference defect 1: None / "None" in names, URLs, env and scripts."""
    def walk(node):
        if isinstance(node, dict):
            return [v for x in node.values() for v in walk(x)]
        return [v for x in node for v in walk(x)] if isinstance(node, list) else [node]

    for file_name, text in rendered[name, target].files.items():
        assert "None" not in text, file_name
        if file_name.endswith(".yaml"):
            assert None not in walk(list(yaml.safe_load_all(text))), file_name


def test_long_prefix_is_refused_with_its_key():
    with pytest.raises(GeneratorError) as info:
        render(minimal(K8sConfig={"name_prefix": "a" * 60}))
    assert info.value.where == "K8sConfig.name_prefix"


def test_role_only_keys_are_used_not_dropped():
    """Reference defect 4: gpus_per_worker / cache_transceiver_backend / LlmdConfig were silently dropped."""
    d = minimal("trtllm", "disagg")
    d["Workers"]["decode"]["cache_transceiver_backend"] = "UCX"
    assert "backend: UCX" in render(d).files["decode_config.yaml"]
    helm = yaml.safe_load(render(minimal(LlmdConfig={"model_size": "42Gi"}), target="llm-d-helm").files["llm-d-values.yaml"])
    assert helm["modelArtifacts"]["size"] == "42Gi"


def test_explain_shows_exactly_what_deploys():
    """Reference defect 8: render-config showed mapping defaults that never deployed."""
    out = render(minimal("sglang"))
    args = yaml.safe_load(out.files["cli_args_agg.yaml"])["args"]
    assert "--disable-cuda-graph-padding" not in args and "--skip-tokenizer-init" not in args
    spans = explain("max_batch_size")["flags"]["sglang"]
    assert spans[-1]["flag"] in args


@pytest.mark.parametrize("name, target", COMBOS)
def test_generator_config_reloads_to_identical_artifacts(rendered, name, target):
    first = rendered[name, target]
    again = render(yaml.safe_load(first.files["generator_config.yaml"]))
    assert again.files == first.files


def test_template_errors_are_errors():
    """Reference defect 7: a broken template fell back to mapping-only args."""
    with pytest.raises(GeneratorError, match="run_node.sh.j2"):
        render_shell("run_node.sh.j2", node=0)


@pytest.mark.parametrize("workers, per_node, expected", [
    ([("prefill", 1, 2), ("decode", 2, 2)], 8, [["0,1", "2,3", "4,5"]]),
    ([("prefill", 2, 4), ("decode", 1, 8)], 8, [["0,1,2,3", "4,5,6,7"], ["0,1,2,3,4,5,6,7"]]),
    ([("agg", 3, 3)], 8, [["0,1,2", "3,4,5"], ["0,1,2"]]),
])
def test_gpu_packing(workers, per_node, expected):
    assert [[p.visible_devices for p in node] for node in pack(workers, per_node)] == expected


def test_worker_not_filling_whole_nodes_is_refused():
    with pytest.raises(GeneratorError, match="Workers.agg.gpus_per_worker"):
        pack([("agg", 1, 12)], 8)


def test_frontend_runs_on_node_zero_only():
    files = render(example("sglang_disagg")).files
    runs = sorted(n for n in files if n.startswith("run_"))
    assert len(runs) == 3
    assert "dynamo.frontend" in files["run_0.sh"] and not any("dynamo.frontend" in files[n] for n in runs[1:])


def test_vllm_role_flag_follows_dynamo_release():
    legacy = render(example("vllm_disagg"), ["generator_dynamo_version=0.8.0", "version=0.14.1"]).files
    assert "--is-prefill-worker" in legacy["cli_args_prefill.yaml"]
    assert "--disaggregation-mode" not in legacy["cli_args_prefill.yaml"]


def test_worker_spanning_nodes_becomes_multinode_dgd():
    d = minimal("sglang", Workers={"agg": {"tensor_parallel_size": 16}})
    worker = _dgd(render(d).files)["spec"]["services"]["SGLangWorker"]
    assert worker["multinode"] == {"nodeCount": 2} and worker["resources"]["limits"]["gpu"] == "8"
    d["Workers"]["agg"]["tensor_parallel_size"] = 12
    with pytest.raises(GeneratorError, match="do not fill whole nodes"):
        render(d)
