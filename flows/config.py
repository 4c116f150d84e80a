"""The pipeline config: what `perfledger run` ingests, derives, estimates, generates and publishes.

One YAML names sources, models, reference scenarios, support-matrix snapshots, deployment YAMLs and
the output folder; command-line values win over the file. Relative paths in the file resolve against
its folder and `package://...` names data shipped in the wheel (perfledger.settings.config_path), so the
embedded default needs only the install and works from any folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

import yaml

from perfledger.estimator.scenarios import DEFAULT_SCENARIOS, ScenarioError, check_scenarios
from perfledger.safe_io import InputFileError, load_yaml
from perfledger.settings import Location, ObjectLocation, config_path, is_object_uri, location, reports_dir, warehouse_root

DEFAULT_CONFIG = Path(__file__).with_name("pipeline.yaml")
STAGES = ("ingest", "validate", "ledger", "matrix", "estimate", "plan", "generate", "publish")
KNOWN_KEYS = {"sources", "models", "warehouse", "out", "matrices", "build_matrix", "deployments", "scenarios", "gate",
              "stages", "plans"}
GATE_KEYS = {"warn_pct", "fail_pct"}


class ConfigError(ValueError):
    """The pipeline config is unreadable or names something wrong."""


@dataclass(frozen=True)
class PipelineConfig:
    sources: list[str]
    models: list[str]
    warehouse: Location                                     # a folder or an ObjectLocation (s3://...)
    out: Path
    path: Path = field(default=DEFAULT_CONFIG)
    matrices: list[dict] = field(default_factory=list)      # [{"path": DIR, "label": L}]
    build_matrix: bool = False                              # also build our own matrix (label perfledger) for `models`
    deployments: list[str] = field(default_factory=list)    # unified deployment YAMLs for the generator
    scenarios: Path = field(default=DEFAULT_SCENARIOS)      # reference scenarios per model
    gate: dict = field(default_factory=lambda: {"warn_pct": 5.0, "fail_pct": 10.0})
    stages: list[str] = field(default_factory=lambda: list(STAGES))
    plans: list[dict] = field(default_factory=list)         # planning questions (estimator.plan.asked.Asked fields)
    allow_symlinked_out: bool = False                       # `out` may be a symlink into another tree (--allow-symlinked-out)

    def to_params(self) -> dict:
        """JSON-safe flow parameters (what a Prefect deployment stores)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}  # not asdict: it would unpack an ObjectLocation
        return {k: (str(v) if isinstance(v, (Path, ObjectLocation)) else v) for k, v in values.items()}

    @classmethod
    def from_params(cls, params: dict) -> PipelineConfig:
        paths = {"out", "path", "scenarios"}
        values = {k: (Path(v) if k in paths else v) for k, v in params.items()}
        return cls(**{**values, "warehouse": location(params["warehouse"])})


def _list(raw: dict, key: str, path: Path) -> list:
    value = raw.get(key) or []
    if not isinstance(value, list):
        raise ConfigError(f"{path}: '{key}' must be a list, not {type(value).__name__}")
    return value


def _source(value: str, base: Path) -> str:
    return value if value == "aic-package" else str(config_path(value, base))


def _matrices(raw: dict, path: Path) -> list[dict]:
    out = []
    for i, entry in enumerate(_list(raw, "matrices", path)):
        if not isinstance(entry, dict) or not {"path", "label"} <= set(entry):
            raise ConfigError(f"{path}: matrices[{i}] needs keys 'path' and 'label'")
        out.append({"path": _source(str(entry["path"]), path.parent), "label": str(entry["label"])})
    return out


def _gate(raw: dict, path: Path) -> dict:
    given = raw.get("gate") or {}
    if not isinstance(given, dict):
        raise ConfigError(f"{path}: gate must be a mapping {{warn_pct, fail_pct}}, not {type(given).__name__}")
    gate = {"warn_pct": 5.0, "fail_pct": 10.0, **given}
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


def _scenarios(raw: dict, path: Path) -> Path:
    """The reference scenarios file, checked now (keys, phases, parallelism, operator shapes against each model's
    config) so a bad one fails `perfledger run` before the first stage, naming the scenario file and key."""
    from perfledger.ledger.specs import find_spec

    scenarios = config_path(raw["scenarios"], path.parent) if raw.get("scenarios") else DEFAULT_SCENARIOS
    try:
        check_scenarios(scenarios, lambda model: find_spec(model).model)
    except ScenarioError as exc:
        raise ConfigError(f"{path}: scenarios: {exc}") from None
    return scenarios


def plan_model(name: str) -> str:
    """A `plans:` model: a lane spec name (kimi-k3) or an HF id the estimator has a config for."""
    from perfledger.estimator.errors import EstimatorError
    from perfledger.estimator.models.config import resolve_model
    from perfledger.ledger.specs import LaneSpecError, find_spec

    try:
        return find_spec(name).model
    except LaneSpecError:
        pass
    try:
        return resolve_model(name).name
    except (EstimatorError, OSError) as exc:
        raise ValueError(f"{name!r} is neither a lane spec nor a model the estimator knows ({exc})") from None


def _plans(raw: dict, path: Path) -> list[dict]:
    """The planning questions, checked now (keys, sizes, SLA, modes, known model) so a bad one fails `perfledger run`
    before the first stage, naming the config file and the key."""
    from perfledger.estimator.plan.asked import PlanConfigError, expand

    try:
        return [a.to_json() for a in expand(raw.get("plans"), plan_model)]
    except PlanConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _warehouse(option: str | None, value: str | None, base: Path) -> Location:
    """The warehouse as `_location` finds a folder; an object-store URI (option or file) is taken as named."""
    named = option or value
    if named and is_object_uri(named):
        return location(named)
    chosen = warehouse_root() if not named else None
    return chosen if isinstance(chosen, ObjectLocation) else _location(option, value, base, warehouse_root)


def _location(option: str | Path | None, value: str | None, base: Path, default) -> Path:
    """A command-line value (relative to the working directory), else the file's (relative to its folder),
    else the settings default (environment, then the state folder); made absolute with symlinks kept, so
    the output-folder check sees the folder that was named (safe_io.check_output_folder)."""
    path = Path(option).expanduser() if option else config_path(value, base) if value else default()
    return Path(os.path.abspath(path))


def load_pipeline_config(path: Path | None = None, *, warehouse: str | None = None, out: Path | None = None) -> PipelineConfig:
    """Load and check a config; command-line values win over the file."""
    path = Path(path).resolve() if path else DEFAULT_CONFIG
    try:
        raw = load_yaml(path, loader_class=yaml.SafeLoader) or {}
    except InputFileError as exc:
        raise ConfigError(f"{exc.where}: cannot read pipeline config ({exc.reason})") from None
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
    base = path.parent
    if is_object_uri(raw.get("out")):
        raise ConfigError(f"{path}: out: {raw['out']} is object storage; the site and reports go to a local folder")
    return PipelineConfig(
        sources=[_source(s, base) for s in sources],
        models=[str(m) for m in _list(raw, "models", path)],
        warehouse=_warehouse(warehouse, raw.get("warehouse"), base),
        out=_location(out, raw.get("out"), base, reports_dir),
        path=path,
        matrices=_matrices(raw, path),
        build_matrix=bool(raw.get("build_matrix", False)),
        deployments=[str(config_path(d, base)) for d in _list(raw, "deployments", path)],
        scenarios=_scenarios(raw, path),
        gate=_gate(raw, path),
        stages=stages,
        plans=_plans(raw, path),
    )
