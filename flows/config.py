"""The pipeline config: what `perfledger run` ingests, which models it derives, where it writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from perfledger import PROJECT_ROOT
from warehouse.paths import resolve_root

DEFAULT_CONFIG = Path(__file__).with_name("pipeline.yaml")
KNOWN_KEYS = {"sources", "models", "warehouse", "out"}


class ConfigError(ValueError):
    """The pipeline config is unreadable or names something wrong."""


@dataclass(frozen=True)
class PipelineConfig:
    sources: list[str]
    models: list[str]
    warehouse: Path
    out: Path
    path: Path = field(default=DEFAULT_CONFIG)


def _project_path(value: str | Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else PROJECT_ROOT / path


def load_pipeline_config(path: Path | None = None, *, warehouse: str | None = None, out: Path | None = None) -> PipelineConfig:
    """Load and check a config; command-line values win over the file."""
    path = path or DEFAULT_CONFIG
    try:
        raw = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read pipeline config ({exc})") from None
    unknown = sorted(set(raw) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {unknown}; known: {sorted(KNOWN_KEYS)}")
    sources = [str(s) for s in raw.get("sources") or []]
    if not sources:
        raise ConfigError(f"{path}: 'sources' must list at least one path or aic-package")
    resolved_sources = [s if s == "aic-package" else str(_project_path(s)) for s in sources]
    return PipelineConfig(
        sources=resolved_sources,
        models=[str(m) for m in raw.get("models") or []],
        warehouse=resolve_root(warehouse or raw.get("warehouse")),
        out=_project_path(out or raw.get("out") or "var/reports"),
        path=Path(path),
    )
