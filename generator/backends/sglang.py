"""SGLang: disaggregation names its transfer backend (nixl is required for disagg since 0.5.6.post2)."""

from __future__ import annotations

from packaging.version import Version

from perfledger.generator.backends.base import Backend
from perfledger.generator.model import Deployment

_TRANSFER_FLAG_SINCE = Version("0.5.6.post2")


class SglangBackend(Backend):
    name = "sglang"

    def _transfer(self, dep: Deployment) -> list[str]:
        if Version(dep.runtime.data_version) < _TRANSFER_FLAG_SINCE:
            return []
        return ["--disaggregation-transfer-backend", dep.section("DynConfig")["transport"]]

    def role_args(self, dep: Deployment, role: str) -> list[str]:
        return ["--disaggregation-mode", role, *self._transfer(dep)] if dep.mode == "disagg" else []

    standalone_role_args = role_args
