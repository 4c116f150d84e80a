"""Kubernetes pieces every target shares: labels, env lists, the benchmark Job (typed dicts, never text)."""

from __future__ import annotations

from typing import Any

from perfledger.generator.model import Deployment


def labels(dep: Deployment, component: str | None = None) -> dict[str, str]:
    out = {"app.kubernetes.io/name": dep.names.deployment, "app.kubernetes.io/managed-by": "perfledger"}
    if component:
        out["app.kubernetes.io/component"] = component
    return out


def env_list(dep: Deployment) -> list[dict[str, str]]:
    """HF_HOME on the model cache plus K8sConfig.k8s_envs, as a Kubernetes env list."""
    envs = {"HF_HOME": dep.section("K8sConfig")["k8s_model_cache"], **dep.section("K8sConfig")["k8s_envs"]}
    return [{"name": name, "value": value} for name, value in envs.items()]


def bench_manifests(dep: Deployment, bench_script: str) -> list[dict[str, Any]]:
    """A ConfigMap holding bench_run.sh and a Job running it against the in-cluster frontend URL."""
    names, meta_ns = dep.names, {"namespace": dep.names.namespace}
    config_map = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": f"{names.bench_job}-script", **meta_ns, "labels": labels(dep, "bench")},
        "data": {"bench_run.sh": bench_script},
    }
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": names.bench_job, **meta_ns, "labels": labels(dep, "bench")},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "bench", "image": dep.section("BenchConfig")["bench_image"],
                "command": ["bash", "/bench/bench_run.sh"],
                "env": [{"name": "BENCH_URL", "value": names.frontend_url},
                        {"name": "BENCH_ARTIFACTS", "value": "/tmp/bench_results"}],
                "volumeMounts": [{"name": "bench-script", "mountPath": "/bench"}],
            }],
            "volumes": [{"name": "bench-script", "configMap": {"name": f"{names.bench_job}-script"}}],
        }}},
    }
    return [config_map, job]
