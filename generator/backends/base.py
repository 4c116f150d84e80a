"""What every backend shares: worker argv from the mapping; hooks for role flags and engine files."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from perfledger.generator.allowlist import allowed, check_flags
from perfledger.generator.errors import GeneratorError
from perfledger.generator.flags import EngineFlags, flag_value, translate
from perfledger.generator.mapping import Mapping
from perfledger.generator.model import Deployment, Worker

DISAGG_KV_CONNECTOR = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


@dataclass(frozen=True)
class Launch:
    """One role's process: command prefix, argv after it, optional engine file (name, content)."""

    role: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    engine_file: tuple[str, dict[str, Any]] | None
    warnings: tuple[str, ...]


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """extra wins; nested mappings merge key by key (extra_engine_args over generated keys)."""
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


class Backend:
    """Base backend: override `role_args`, `engine_config`, `engine_file_args`, `standalone_role_args`."""

    name = ""

    def __init__(self, mapping: Mapping):
        self.mapping = mapping
        self.data = mapping.backends[self.name]

    # ---- hooks -------------------------------------------------------------------------------
    def role_args(self, dep: Deployment, role: str) -> list[str]:
        """Dynamo worker flags that select the disaggregation role."""
        return ["--disaggregation-mode", role] if dep.mode == "disagg" else []

    def standalone_role_args(self, dep: Deployment, role: str) -> list[str]:
        """Engine-native disaggregation flags for targets without Dynamo (llm-d)."""
        return []

    def engine_config(self, dep: Deployment, worker: Worker, flags: EngineFlags) -> dict[str, Any] | None:
        """The engine YAML for backends that take one (TRT-LLM)."""
        if flags.engine:
            raise GeneratorError(f"Workers.{worker.role}", f"{self.name} has no engine file for {sorted(flags.engine)}")
        return None

    def engine_file_args(self, path: str) -> list[str]:
        return []

    # ---- shared ------------------------------------------------------------------------------
    def _finish(self, dep: Deployment, worker: Worker, generated: list[str], engine: dict[str, Any] | None,
                warnings: list[str]) -> tuple[list[str], dict[str, Any] | None]:
        """Allow-list check of what we generated, then append the user's passthroughs (warned, not checked)."""
        version = dep.runtime.data_version
        check_flags(self.name, version, generated, engine, f"Workers.{worker.role}")
        extra = list(worker.params.get("extra_cli_args", []))
        unknown = [t for t in extra if t.startswith("--") and t not in allowed(self.name, version)]
        if unknown:
            warnings.append(f"WARNING: Workers.{worker.role}.extra_cli_args {unknown} are not in the "
                            f"{self.name} {version} allow-list; passed through unchecked")
        if engine is not None:
            engine = deep_merge(engine, worker.params.get("extra_engine_args", {}))
        return generated + extra, engine

    def _flags(self, dep: Deployment, worker: Worker) -> tuple[EngineFlags, list[str]]:
        rt = dep.runtime
        flags = translate(worker.params, self.name, rt.data_version, self.mapping, f"Workers.{worker.role}")
        given = dep.input_keys.get(worker.role, frozenset())
        warnings = [f"WARNING: Workers.{worker.role}.{key} has no {self.name} {rt.data_version} flag; not emitted"
                    for key in flags.unsupported if key in given]
        return flags, warnings

    def launch(self, dep: Deployment, worker: Worker) -> Launch:
        """The Dynamo worker process for one role."""
        flags, warnings = self._flags(dep, worker)
        service = dep.section("ServiceConfig")
        role = list(self.data["encode_flags"]) if worker.role == "encode" else self.role_args(dep, worker.role)
        args = [self.data["model_flag"], flag_value(service["model_path"], "ServiceConfig.model_path"),
                self.data["served_name_flag"], flag_value(service["served_model_name"], "ServiceConfig.served_model_name"),
                *role, *flags.cli]
        args, engine = self._finish(dep, worker, args, self.engine_config(dep, worker, flags), warnings)
        engine_file = (f"{worker.role}_config.yaml", engine) if engine is not None else None
        return Launch(worker.role, ("python3", "-m", self.data["module"]), tuple(args), engine_file, tuple(warnings))

    def standalone_launch(self, dep: Deployment, worker: Worker) -> Launch:
        """The engine's own server (no Dynamo), for llm-d."""
        if "standalone" not in self.data:
            raise GeneratorError("target", f"{dep.target} does not support backend {self.name}")
        if worker.role == "encode":
            raise GeneratorError("Workers.encode", f"{dep.target} has no encode pool; a separate multimodal "
                                                   "encode worker needs target dynamo")
        flags, warnings = self._flags(dep, worker)
        service = dep.section("ServiceConfig")
        flag_value(service["model_path"], "ServiceConfig.model_path")
        flag_value(service["served_model_name"], "ServiceConfig.served_model_name")
        model = [service["model_path"]] if self.data.get("standalone_model") == "positional" \
            else [self.data["model_flag"], service["model_path"]]
        args = [*model, self.data["served_name_flag"], service["served_model_name"], "--port",
                str(service["port"]), *self.standalone_role_args(dep, worker.role), *flags.cli]
        args, _ = self._finish(dep, worker, args, self.engine_config(dep, worker, flags), warnings)
        return Launch(worker.role, tuple(self.data["standalone"]), tuple(args), None, tuple(warnings))
