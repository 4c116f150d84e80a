"""Dynamo target: a DynamoGraphDeployment (nvidia.com/v1alpha1), plus a ConfigMap of TRT-LLM engine files.

Containers run in exec form (command + args lists), so no value ever passes through a shell; TRT-LLM
`inline` mode writes the engine file from an environment variable with a fixed script.
"""

from __future__ import annotations

from typing import Any

from perfledger.generator.backends import Backend, Launch
from perfledger.generator.k8s_common import env_list, labels
from perfledger.generator.model import Deployment
from perfledger.generator.scripts import frontend_argv
from perfledger.generator.topology import nodes_per_worker
from perfledger.generator.yamlio import dump_yaml

_SERVICE_PREFIX = {"vllm": "Vllm", "sglang": "SGLang", "trtllm": "TRTLLM"}
_ENGINE_DIR = "/engine-configs"
_INLINE_WRITER = 'printf "%s" "$PERFLEDGER_ENGINE_CONFIG" > /tmp/engine_config.yaml && exec "$@"'


def service_name(backend: str, role: str, mode: str) -> str:
    """VllmWorker (agg), VllmPrefillWorker / VllmDecodeWorker (disagg), VllmEncodeWorker, likewise SGLang*, TRTLLM*."""
    named = mode == "disagg" or role == "encode"
    return f"{_SERVICE_PREFIX[backend]}{role.capitalize() if named else ''}Worker"


def _worker(dep: Deployment, backend: Backend, launch: Launch, replicas: int, gpus: int) -> dict[str, Any]:
    k8s = dep.section("K8sConfig")
    container: dict[str, Any] = {"image": k8s["k8s_image"], "workingDir": "/workspace"}
    envs = env_list(dep)
    extra: dict[str, Any] = {}
    argv = [*launch.command, *launch.args]
    if launch.engine_file and k8s["k8s_engine_mode"] == "inline":
        envs.append({"name": "PERFLEDGER_ENGINE_CONFIG", "value": dump_yaml(launch.engine_file[1])})
        container["command"] = ["bash", "-c", _INLINE_WRITER, "--"]
        container["args"] = [*argv, *backend.engine_file_args("/tmp/engine_config.yaml")]
    else:
        if launch.engine_file:
            argv += backend.engine_file_args(f"{_ENGINE_DIR}/{launch.engine_file[0]}")
            container["volumeMounts"] = [{"name": "engine-configs", "mountPath": _ENGINE_DIR, "readOnly": True}]
            extra["volumes"] = [{"name": "engine-configs", "configMap": {"name": dep.names.engine_configmap}}]
        container["command"], container["args"] = list(argv[:3]), list(argv[3:])
    service: dict[str, Any] = {"componentType": "worker"}
    if dep.mode == "disagg" and launch.role != "encode":  # the planner scales prefill / decode
        service["subComponentType"] = launch.role
    per_node = dep.section("NodeConfig")["num_gpus_per_node"]
    span = nodes_per_worker(launch.role, gpus, per_node)
    if span > 1:  # one worker across nodes: the operator starts nodeCount pods of per_node GPUs
        service["multinode"] = {"nodeCount": span}
        gpus = per_node
    service.update({"replicas": replicas, "resources": {"limits": {"gpu": str(gpus)}}, "envs": envs})
    if k8s.get("k8s_pvc_name"):
        service["volumeMounts"] = [{"name": k8s["k8s_pvc_name"], "mountPoint": k8s["k8s_model_cache"]}]
    service["extraPodSpec"] = {**extra, "mainContainer": container}
    return service


def build_dynamo(dep: Deployment, backend: Backend, launches: dict[str, Launch]) -> list[dict[str, Any]]:
    """[ConfigMap (TRT-LLM configmap mode)], DynamoGraphDeployment."""
    k8s, names = dep.section("K8sConfig"), dep.names
    docs: list[dict[str, Any]] = []
    files = {launch.engine_file[0]: dump_yaml(launch.engine_file[1]) for launch in launches.values() if launch.engine_file}
    if files and k8s["k8s_engine_mode"] == "configmap":
        docs.append({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": names.engine_configmap, "namespace": names.namespace,
                                  "labels": labels(dep, "engine-config")},
                     "data": files})
    frontend = frontend_argv(dep)
    services: dict[str, Any] = {"Frontend": {
        "componentType": "frontend", "replicas": 1,
        "extraPodSpec": {"mainContainer": {"image": k8s["k8s_image"], "command": frontend[:3], "args": frontend[3:]}},
    }}
    for worker in dep.workers:
        services[service_name(dep.backend, worker.role, dep.mode)] = _worker(
            dep, backend, launches[worker.role], worker.replicas, worker.gpus)
    spec: dict[str, Any] = {"backendFramework": dep.backend, "services": services}
    if k8s.get("k8s_pvc_name"):
        spec["pvcs"] = [{"name": k8s["k8s_pvc_name"], "create": False}]
    docs.append({"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment",
                 "metadata": {"name": names.deployment, "namespace": names.namespace, "labels": labels(dep)},
                 "spec": spec})
    return docs
