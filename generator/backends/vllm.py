"""vLLM: the worker role flag depends on the Dynamo release; disaggregation needs a KV connector."""

from __future__ import annotations

from packaging.version import Version

from perfledger.generator.backends.base import DISAGG_KV_CONNECTOR, Backend
from perfledger.generator.model import Deployment

# Dynamo < 1.0 selected the role with --is-prefill-worker / --is-decode-worker (removed in Dynamo 1.4).
_MODERN_ROLE_FLAGS = Version("1.0.0")


class VllmBackend(Backend):
    name = "vllm"

    def role_args(self, dep: Deployment, role: str) -> list[str]:
        if dep.mode != "disagg":
            return []
        connector = ["--kv-transfer-config", DISAGG_KV_CONNECTOR]  # vLLM disagg needs a KV connector
        if Version(dep.runtime.dynamo_version) < _MODERN_ROLE_FLAGS:
            return [f"--is-{role}-worker", *connector]
        return ["--disaggregation-mode", role, *connector]

    def standalone_role_args(self, dep: Deployment, role: str) -> list[str]:
        return ["--kv-transfer-config", DISAGG_KV_CONNECTOR] if dep.mode == "disagg" else []
