"""Write artifacts into --out and keep the folder equal to the latest result.

A manifest (`.perfledger-generated.json`) records every file the generator wrote. On the next run the
files it listed that the new result no longer has are removed, so a folder re-generated from agg to
disagg, or from dynamo to llm-d, never keeps stale scripts or manifests that look current. Only files the
manifest names are touched: anything else in the folder (a user's notes) is left alone. Every file is
written new and renamed into place (perfledger.safe_io), so a symlink planted in the folder is replaced,
never written through, and a symlinked output folder pointing into another tree is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

from perfledger.generator.errors import GeneratorError
from perfledger.safe_io import UnsafeOutputError, check_output_folder, write_file

MANIFEST = ".perfledger-generated.json"
_FORMAT = "perfledger-generator-manifest/1"


def _safe_name(name: str, where: str) -> str:
    """A relative path that stays inside the folder (no absolute paths, no `..`)."""
    path = Path(name)
    if not name or path.is_absolute() or ".." in path.parts:
        raise GeneratorError(where, f"file name {name!r} escapes the output folder")
    return name


def read_manifest(out_dir: Path) -> list[str]:
    """Names the previous generation wrote; [] when the folder has no manifest (a symlink planted at its
    name is not one: the generator never writes links, and it is replaced by the new manifest)."""
    path = out_dir / MANIFEST
    if path.is_symlink() or not path.is_file():
        return []
    where = str(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GeneratorError(where, f"unreadable manifest ({exc}); remove it to regenerate") from None
    if not isinstance(data, dict) or data.get("format") != _FORMAT or not isinstance(data.get("files"), list) \
            or not all(isinstance(n, str) for n in data["files"]):
        raise GeneratorError(where, f"expected {{'format': {_FORMAT!r}, 'files': [names]}}; remove it to regenerate")
    return [_safe_name(n, f"{where}: files") for n in data["files"]]


def remove_stale(out_dir: Path, previous: list[str], current: set[str]) -> list[str]:
    """Delete files of the previous generation that the new one does not write; returns warnings."""
    warnings = []
    root = out_dir.resolve()
    for name in sorted(set(previous) - current):
        path = out_dir / name
        redirected = path.exists() and path.resolve().parent != (root / name).parent  # a symlinked folder
        if path.is_symlink() or not path.is_file() or redirected:
            if path.exists() or path.is_symlink():
                warnings.append(f"WARNING: {name} was generated earlier but is no longer a plain file; left in place")
            continue
        path.unlink()
        warnings.append(f"WARNING: removed stale {name} from an earlier generation in {out_dir} "
                        "(the new result does not include it)")
        parent = path.parent
        while parent != out_dir and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    return warnings


def write_output(out_dir: Path, files: dict[str, str], *, allow_symlinked_out: bool = False) -> tuple[list[Path], list[str]]:
    """Write files (scripts executable), drop stale ones, record the manifest; returns (paths, warnings)."""
    for name in files:
        _safe_name(name, name)
        if name == MANIFEST:
            raise GeneratorError(name, "artifact name collides with the generator manifest")
    try:
        check_output_folder(out_dir, allow_symlink=allow_symlinked_out)
        previous = read_manifest(out_dir)
        written = [write_file(out_dir, name, text, mode=0o755 if name.endswith(".sh") else 0o644)
                   for name, text in files.items()]
        warnings = remove_stale(out_dir, previous, set(files))
        manifest = {"format": _FORMAT, "files": sorted(files)}
        write_file(out_dir, MANIFEST, json.dumps(manifest, indent=1) + "\n")
    except UnsafeOutputError as exc:
        raise GeneratorError("", str(exc)) from None
    return written, warnings
