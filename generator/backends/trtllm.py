"""TRT-LLM: engine knobs go to an LLM-API YAML file passed with --extra-engine-args."""

from __future__ import annotations

from typing import Any

from packaging.version import Version

from perfledger.generator.backends.base import Backend
from perfledger.generator.errors import GeneratorError
from perfledger.generator.flags import EngineFlags
from perfledger.generator.model import Deployment, Worker

_TRANSCEIVER_SINCE = Version("1.0.0rc4")


class TrtllmBackend(Backend):
    name = "trtllm"

    def engine_config(self, dep: Deployment, worker: Worker, flags: EngineFlags) -> dict[str, Any]:
        engine: dict[str, Any] = {"backend": "pytorch", **flags.engine}
        if dep.mode == "disagg" and worker.role != "encode":  # KV moves prefill -> decode only
            if Version(dep.runtime.data_version) < _TRANSCEIVER_SINCE:
                raise GeneratorError("version", f"trtllm {dep.runtime.data_version} has no cache_transceiver_config; "
                                                f"disaggregation needs {_TRANSCEIVER_SINCE} or newer")
            backend = worker.params.get("cache_transceiver_backend")
            if backend is None:
                raise GeneratorError(f"Workers.{worker.role}.cache_transceiver_backend", "required for disaggregation")
            engine["cache_transceiver_config"] = {"backend": backend}
        return engine

    def engine_file_args(self, path: str) -> list[str]:
        return ["--extra-engine-args", path]
