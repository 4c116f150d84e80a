"""llm-d targets: llm-d-modelservice Helm values, or a kustomize base of Deployments and a Service.

The engine runs its own server (no Dynamo); the agg role is served by the decode pool, as llm-d does.
"""

from __future__ import annotations

from typing import Any

from perfledger.generator.backends import Backend, Launch
from perfledger.generator.k8s_common import env_list, labels
from perfledger.generator.model import Deployment, Worker

_POOLS = {"agg": "decode", "decode": "decode", "prefill": "prefill"}


def _container(dep: Deployment, backend: Backend, launch: Launch, gpus: int) -> dict[str, Any]:
    port = dep.section("ServiceConfig")["port"]
    return {"name": backend.name, "image": dep.section("K8sConfig")["k8s_image"],
            "command": list(launch.command), "args": list(launch.args), "env": env_list(dep),
            "ports": [{"containerPort": port, "protocol": "TCP"}],
            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}}


def build_helm_values(dep: Deployment, backend: Backend, launches: dict[str, Launch]) -> dict[str, Any]:
    """values.yaml for the llm-d-modelservice chart."""
    llmd, service = dep.section("LlmdConfig"), dep.section("ServiceConfig")
    values: dict[str, Any] = {
        "multinode": False,
        "modelArtifacts": {"uri": llmd["model_uri"], "name": service["served_model_name"], "size": llmd["model_size"]},
        "routing": {"servicePort": service["port"],
                    "proxy": {"enabled": dep.mode == "disagg", "connector": "nixlv2"},
                    "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                    "name": dep.names.frontend_service}],
                    "gatewayClassName": llmd["gateway_class"]},
        "decode": {"create": False}, "prefill": {"create": False},
    }
    for worker in dep.workers:
        values[_POOLS[worker.role]] = {
            "create": True, "replicas": worker.replicas,
            "parallelism": {"tensor": worker.params.get("tensor_parallel_size", 1),
                            "data": worker.params.get("data_parallel_size", 1)},
            "containers": [{**_container(dep, backend, launches[worker.role], worker.gpus), "modelCommand": "custom"}],
        }
    return values


def _deployment(dep: Deployment, backend: Backend, worker: Worker, launch: Launch) -> dict[str, Any]:
    pool = _POOLS[worker.role]
    selector = {**labels(dep), "llm-d.ai/role": pool}
    pod_spec: dict[str, Any] = {"containers": [_container(dep, backend, launch, worker.gpus)]}
    k8s = dep.section("K8sConfig")
    if k8s.get("k8s_pvc_name"):
        pod_spec["volumes"] = [{"name": "model-cache", "persistentVolumeClaim": {"claimName": k8s["k8s_pvc_name"]}}]
        pod_spec["containers"][0]["volumeMounts"] = [{"name": "model-cache", "mountPath": k8s["k8s_model_cache"]}]
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"{dep.names.deployment}-{pool}", "labels": selector},
            "spec": {"replicas": worker.replicas, "selector": {"matchLabels": selector},
                     "template": {"metadata": {"labels": selector}, "spec": pod_spec}}}


def build_kustomize(dep: Deployment, backend: Backend, launches: dict[str, Launch]) -> dict[str, dict[str, Any]]:
    """{'kustomize/<file>': manifest}: one Deployment per pool, a Service on the decode pool, the kustomization."""
    files: dict[str, dict[str, Any]] = {}
    for worker in dep.workers:
        files[f"kustomize/{_POOLS[worker.role]}.yaml"] = _deployment(dep, backend, worker, launches[worker.role])
    port = dep.section("ServiceConfig")["port"]
    files["kustomize/service.yaml"] = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": dep.names.frontend_service, "labels": labels(dep)},
        "spec": {"selector": {**labels(dep), "llm-d.ai/role": "decode"},
                 "ports": [{"name": "http", "port": 80, "targetPort": port, "protocol": "TCP"}]},
    }
    files["kustomize/kustomization.yaml"] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "namespace": dep.names.namespace,
        "resources": sorted(name.split("/", 1)[1] for name in files),
    }
    return files
