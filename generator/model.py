"""The resolved deployment: one object that every renderer reads (mode, runtime, workers, names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfledger.generator.errors import GeneratorError
from perfledger.generator.schema import ROLES
from perfledger.generator.versions import Runtime

_DNS_MAX = 63


@dataclass(frozen=True)
class Worker:
    """One role: its replica count, GPUs per replica and final (post-rule) parameters."""

    role: str
    replicas: int
    gpus: int
    params: dict[str, Any]


@dataclass(frozen=True)
class Names:
    """Every Kubernetes name and URL, derived from K8sConfig.name_prefix + mode in one place."""

    namespace: str
    deployment: str
    frontend_service: str
    frontend_url: str
    bench_job: str
    engine_configmap: str


@dataclass(frozen=True)
class Deployment:
    runtime: Runtime
    target: str
    mode: str
    doc: dict[str, Any]  # the resolved document after rules
    workers: tuple[Worker, ...]
    names: Names
    input_keys: dict[str, frozenset[str]]  # Workers.<role> keys the user gave (before rules)

    @property
    def backend(self) -> str:
        return self.runtime.backend

    def section(self, name: str) -> dict[str, Any]:
        return self.doc[name]


def detect_mode(workers: dict[str, Any], declared: str | None) -> str:
    """prefill + decode -> disagg, agg -> agg (either may add an encode worker); anything else, or a
    contradicting DynConfig.mode, fails."""
    roles = set(workers) - {"encode"}
    if roles == {"prefill", "decode"}:
        mode = "disagg"
    elif roles == {"agg"}:
        mode = "agg"
    else:
        raise GeneratorError("Workers", f"roles {sorted(workers)} are neither agg nor prefill + decode "
                                        "(an encode worker needs one of them to serve)")
    if declared is not None and declared != mode:
        raise GeneratorError("DynConfig.mode", f"says {declared!r} but Workers has the {mode} roles {sorted(roles)}")
    return mode


def derive_names(doc: dict[str, Any], mode: str, target: str) -> Names:
    """DNS names for the target; a name over 63 characters names the prefix that caused it."""
    k8s, port = doc["K8sConfig"], doc["ServiceConfig"]["port"]
    ns, deployment = k8s["k8s_namespace"], f"{k8s['name_prefix']}-{mode}"
    if target == "dynamo":
        frontend, url_port = f"{deployment}-frontend", port
    else:
        frontend, url_port = f"{deployment}-gateway", 80
    names = Names(ns, deployment, frontend, f"http://{frontend}.{ns}.svc.cluster.local:{url_port}",
                  f"{deployment}-bench", f"{deployment}-engine-configs")
    for value in (names.frontend_service, names.bench_job, names.engine_configmap):
        if len(value) > _DNS_MAX:
            raise GeneratorError("K8sConfig.name_prefix", f"too long: derived name {value!r} exceeds {_DNS_MAX} characters")
    return names


def build_deployment(doc: dict[str, Any], given: dict[str, Any], runtime: Runtime, target: str) -> Deployment:
    """Aggregate the post-rule document into workers; gpus_per_worker must have been derived."""
    mode = doc["DynConfig"]["mode"]
    counts = doc["WorkerConfig"]
    workers = []
    for role in ROLES:
        if role in doc["Workers"]:
            params = doc["Workers"][role]
            if "gpus_per_worker" not in params:
                raise GeneratorError(f"Workers.{role}.gpus_per_worker", "not set by input or rules")
            workers.append(Worker(role, counts[f"{role}_workers"], params["gpus_per_worker"], params))
    input_keys = {role: frozenset(params) for role, params in given.get("Workers", {}).items()}
    return Deployment(runtime, target, mode, doc, tuple(workers), derive_names(doc, mode, target), input_keys)
