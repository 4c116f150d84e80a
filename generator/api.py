"""The pipeline entry point: unified YAML + overrides -> artifacts on disk (IO only at this edge)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfledger.generator.outdir import write_output
from perfledger.generator.overrides import apply_overrides
from perfledger.generator.render import render_artifacts
from perfledger.generator.resolve import resolve
from perfledger.generator.versions import release_for_data
from perfledger.generator.yamlio import dump_yaml, load_yaml_file


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
                   target: str | None = None, held_versions: dict[str, list[str]] | None = None) -> Any:
    """File < --set < promoted flags (--backend / --version / --target). A document naming neither a version
    nor a Dynamo release gets the newest release pinning a backend version the perf data holds (`held_versions`:
    backend -> versions in the warehouse), so its default matches the data, not the code's default release."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return raw  # check_document reports it with the file name
    doc = apply_overrides(raw, overrides)
    promoted = {"backend": backend, "version": version, "target": target}
    doc.update({k: v for k, v in promoted.items() if v is not None})
    if held_versions and "version" not in doc and "generator_dynamo_version" not in doc and isinstance(doc.get("backend"), str):
        release = release_for_data(doc["backend"], held_versions.get(doc["backend"], []))
        if release is not None:
            doc["generator_dynamo_version"] = release
    return doc


def render_document(doc: Any, where: str) -> Rendered:
    """Resolve and render one document without touching the file system."""
    resolution = resolve(doc, where)
    files, warnings = render_artifacts(resolution.deployment)
    files["generator_config.yaml"] = dump_yaml(resolution.resolved_input)
    return Rendered(dict(sorted(files.items())), resolution.deployment.mode, [*resolution.warnings, *warnings])


def generate(input_path: Path, overrides: list[str], out_dir: Path, backend: str | None = None,
             version: str | None = None, target: str | None = None, *,
             allow_symlinked_out: bool = False, held_versions: dict[str, list[str]] | None = None) -> GenerationResult:
    """Render every artifact for one unified deployment YAML into out_dir (a symlink to a folder in another
    tree only with `allow_symlinked_out`).

    Files an earlier generation wrote into out_dir (its manifest) and this one does not are removed, with
    a warning each. Raises GeneratorError (bad input; `.where` names the file/key) or UsageError.
    """
    raw = load_yaml_file(Path(input_path))
    rendered = render_document(build_document(raw, overrides, backend, version, target, held_versions), str(input_path))
    files, cleanup = write_output(Path(out_dir), rendered.files, allow_symlinked_out=allow_symlinked_out)
    return GenerationResult(files, rendered.mode, [*rendered.warnings, *cleanup])


def held_versions(root: str | None) -> dict[str, list[str]]:
    """backend -> versions the warehouse's ingested batches hold ({} without a warehouse: the code's defaults)."""
    from perfledger.warehouse.paths import resolve_root
    from perfledger.warehouse.store import Warehouse

    path = resolve_root(root)
    if isinstance(path, Path) and not path.is_dir():  # an object-store warehouse is asked for its table below
        return {}
    wh = Warehouse(path)
    if not wh.has_table("batches"):
        return {}
    batches = wh.read_table("batches")
    held: dict[str, set[str]] = {}
    for backend, version in batches.select("backend", "version").unique().iter_rows():
        held.setdefault(backend, set()).add(version)
    return {b: sorted(v) for b, v in held.items()}
