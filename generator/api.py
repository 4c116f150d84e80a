"""The pipeline entry point: unified YAML + overrides -> artifacts on disk (IO only at this edge)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generator.errors import GeneratorError
from generator.overrides import apply_overrides
from generator.render import render_artifacts
from generator.resolve import resolve
from generator.yamlio import dump_yaml, load_yaml_file


@dataclass(frozen=True)
class GenerationResult:
    """What `generate` wrote: file paths, the deployment mode (agg | disagg) and every warning."""

    files: list[Path]
    mode: str
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Rendered:
    """The pure result: {relative name: text} (generator_config.yaml included), mode, warnings."""

    files: dict[str, str]
    mode: str
    warnings: list[str]


def build_document(raw: Any, overrides: list[str], backend: str | None = None, version: str | None = None,
                   target: str | None = None) -> Any:
    """File < --set < promoted flags (--backend / --version / --target)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return raw  # check_document reports it with the file name
    doc = apply_overrides(raw, overrides)
    promoted = {"backend": backend, "version": version, "target": target}
    doc.update({k: v for k, v in promoted.items() if v is not None})
    return doc


def render_document(doc: Any, where: str) -> Rendered:
    """Resolve and render one document without touching the file system."""
    resolution = resolve(doc, where)
    files, warnings = render_artifacts(resolution.deployment)
    files["generator_config.yaml"] = dump_yaml(resolution.resolved_input)
    return Rendered(dict(sorted(files.items())), resolution.deployment.mode, [*resolution.warnings, *warnings])


def write_files(out_dir: Path, files: dict[str, str]) -> list[Path]:
    """Write artifacts under out_dir (scripts executable); names are generator-made, never user input."""
    written = []
    for name, text in files.items():
        path = out_dir / name
        if ".." in Path(name).parts or Path(name).is_absolute():
            raise GeneratorError(name, "artifact name escapes the output folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if name.endswith(".sh"):
            os.chmod(path, 0o755)
        written.append(path)
    return written


def generate(input_path: Path, overrides: list[str], out_dir: Path, backend: str | None = None,
             version: str | None = None, target: str | None = None) -> GenerationResult:
    """Render every artifact for one unified deployment YAML into out_dir.

    Raises GeneratorError (bad input; `.where` names the file/key) or UsageError (malformed --set).
    """
    raw = load_yaml_file(Path(input_path))
    rendered = render_document(build_document(raw, overrides, backend, version, target), str(input_path))
    files = write_files(Path(out_dir), rendered.files)
    return GenerationResult(files, rendered.mode, rendered.warnings)
