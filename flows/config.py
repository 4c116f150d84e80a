"""The pipeline config: what `perfledger run` ingests, derives, estimates, generates and publishes.

One YAML names sources, models, reference scenarios, support-matrix snapshots, deployment YAMLs and
the output folder; command-line values win over the file. The embedded default needs only the install.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from perfledger import PROJECT_ROOT
from perfledger.estimator.scenarios import DEFAULT_SCENARIOS
from perfledger.warehouse.paths import resolve_root

DEFAULT_CONFIG = Path(__file__).with_name("pipeline.yaml")
STAGES = ("ingest", "validate", "ledger", "matrix", "estimate", "generate", "publish")
KNOWN_KEYS = {"sources", "models", "warehouse", "out", "matrices", "build_matrix", "deployments", "scenarios", "gate",
              "stages"}
GATE_KEYS = {"warn_pct", "fail_pct"}


class ConfigError(ValueError):
    """The pipeline config is unreadable or names something wrong."""


@dataclass(frozen=True)
class PipelineConfig:
    sources: list[str]
    models: list[str]
    warehouse: Path
    out: Path
    path: Path = field(default=DEFAULT_CONFIG)
    matrices: list[dict] = field(default_factory=list)      # [{"path": DIR, "label": L}]
    build_matrix: bool = False                              # also build our own matrix (label perfledger) for `models`
    deployments: list[str] = field(default_factory=list)    # unified deployment YAMLs for the generator
    scenarios: Path = field(default=DEFAULT_SCENARIOS)      # reference scenarios per model
    gate: dict = field(default_factory=lambda: {"warn_pct": 5.0, "fail_pct": 10.0})
    stages: list[str] = field(default_factory=lambda: list(STAGES))

    def to_params(self) -> dict:
        """JSON-safe flow parameters (what a Prefect deployment stores)."""
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_params(cls, params: dict) -> "PipelineConfig":
        paths = {"warehouse", "out", "path", "scenarios"}
        return cls(**{k: (Path(v) if k in paths else v) for k, v in params.items()})


def _project_path(value: str | Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else PROJECT_ROOT / path


def _list(raw: dict, key: str, path: Path) -> list:
    value = raw.get(key) or []
    if not isinstance(value, list):
        raise ConfigError(f"{path}: '{key}' must be a list, not {type(value).__name__}")
    return value


def _matrices(raw: dict, path: Path) -> list[dict]:
    out = []
    for i, entry in enumerate(_list(raw, "matrices", path)):
        if not isinstance(entry, dict) or not {"path", "label"} <= set(entry):
            raise ConfigError(f"{path}: matrices[{i}] needs keys 'path' and 'label'")
        out.append({"path": "aic-package" if entry["path"] == "aic-package" else str(_project_path(entry["path"])),
                    "label": str(entry["label"])})
    return out


def _gate(raw: dict, path: Path) -> dict:
    gate = {"warn_pct": 5.0, "fail_pct": 10.0, **(raw.get("gate") or {})}
    unknown = sorted(set(gate) - GATE_KEYS)
    if unknown:
        raise ConfigError(f"{path}: gate: unknown key(s) {unknown}; known: {sorted(GATE_KEYS)}")
    try:
        gate = {k: float(v) for k, v in gate.items()}
    except (TypeError, ValueError):
        raise ConfigError(f"{path}: gate thresholds must be numbers (percent)") from None
    if not 0 <= gate["warn_pct"] <= gate["fail_pct"]:
        raise ConfigError(f"{path}: gate: need 0 <= warn_pct <= fail_pct")
    return gate


def load_pipeline_config(path: Path | None = None, *, warehouse: str | None = None, out: Path | None = None) -> PipelineConfig:
    """Load and check a config; command-line values win over the file."""
    path = Path(path or DEFAULT_CONFIG)
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read pipeline config ({exc})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the pipeline config must be a mapping")
    unknown = sorted(set(raw) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {unknown}; known: {sorted(KNOWN_KEYS)}")
    sources = [str(s) for s in _list(raw, "sources", path)]
    if not sources:
        raise ConfigError(f"{path}: 'sources' must list at least one path or aic-package")
    stages = [str(s) for s in _list(raw, "stages", path)] or list(STAGES)
    bad = [s for s in stages if s not in STAGES]
    if bad:
        raise ConfigError(f"{path}: stages: unknown stage(s) {bad}; known: {list(STAGES)}")
    return PipelineConfig(
        sources=[s if s == "aic-package" else str(_project_path(s)) for s in sources],
        models=[str(m) for m in _list(raw, "models", path)],
        warehouse=resolve_root(warehouse or raw.get("warehouse")),
        out=_project_path(out or raw.get("out") or "var/reports"),
        path=path,
        matrices=_matrices(raw, path),
        build_matrix=bool(raw.get("build_matrix", False)),
        deployments=[str(_project_path(d)) for d in _list(raw, "deployments", path)],
        scenarios=_project_path(raw["scenarios"]) if raw.get("scenarios") else DEFAULT_SCENARIOS,
        gate=_gate(raw, path),
        stages=stages,
    )
