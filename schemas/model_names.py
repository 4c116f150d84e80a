"""One model naming for every command: `--model` is an HF id, a lane-spec name or a path to an HF config.

Every command that takes a model (estimate, matrix, ledger) resolves it here, so `kimi-k3`,
`moonshotai/Kimi-K3`, `moonshotai/kimi-k3` and `path/to/Kimi-K3/` mean the same model wherever they are given.
Known names are the lane specs (`schemas/lanes/<name>.yaml` and the HF id each names) and the model configs
(`<org>--<name>_config.json` in `settings.model_config_dirs()`); an unknown name is an error listing the
closest known ones (difflib), never a silent empty answer.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from perfledger import settings

LANES_DIR = settings.package_file("perfledger.schemas", "lanes")
CONFIG_SUFFIX = "_config.json"
SIDECAR_SUFFIX = "_hf_quant_config.json"


class UnknownModel(ValueError):
    """A model name no lane spec, model config or path answers; the message lists close matches."""


@dataclass(frozen=True)
class ModelName:
    """A resolved `--model`: the HF id (None for a config path that names none), the config file when the
    name was a path, and the lane-spec name when the model has one."""

    given: str
    hf_id: str | None
    config_path: Path | None = None
    lane: str | None = None

    @property
    def label(self) -> str:
        """How outputs name the model: the HF id, else the path given."""
        return self.hf_id or self.given


@cache
def lane_models(directory: Path = LANES_DIR) -> dict[str, str]:
    """Lane-spec name (file stem) -> the HF id its `model:` names (a spec without one is skipped; the
    ledger's loader reports it)."""
    names = {}
    for path in sorted(Path(directory).glob("*.yaml")):
        try:
            raw = yaml.safe_load(path.read_text())
        except yaml.YAMLError:
            continue
        if isinstance(raw, dict) and isinstance(raw.get("model"), str):
            names[path.stem] = raw["model"]
    return names


def config_models() -> list[str]:
    """HF ids with a model config in the model-config folders (`Org--Name_config.json` -> `Org/Name`)."""
    ids = set()
    for folder in settings.model_config_dirs():
        for path in folder.glob(f"*{CONFIG_SUFFIX}"):
            if not path.name.endswith(SIDECAR_SUFFIX):
                ids.add(path.name[: -len(CONFIG_SUFFIX)].replace("--", "/", 1))
    return sorted(ids)


def _looks_like_path(name: str) -> bool:
    """A name that can only be a path: it ends in .json, starts at a folder (/, ./, ../, ~) or exists on disk.
    An `org/name` that is not on disk stays an HF id."""
    if name.endswith(".json") or name.startswith(("/", "./", "../", "~")) or name in (".", ".."):
        return True
    try:
        return _user_path(name).exists()
    except (OSError, ValueError):  # a name no file system takes (too long, NUL): not a path
        return False


def _user_path(name: str) -> Path:
    """`~` expanded where a home is known (os.path.expanduser leaves `~user` of no such user as it is)."""
    return Path(os.path.expanduser(name) if "\0" not in name else name)


def _from_path(name: str) -> ModelName:
    given = _user_path(name)
    try:
        folder = given.is_dir()
        file = given / "config.json" if folder else given
        found = file.is_file()
    except (OSError, ValueError):  # a name no file system takes (too long, NUL)
        folder, found = False, False
    if not found:
        what = "holds no config.json" if folder else "does not exist"
        raise UnknownModel(f"model {name}: {what} (a path must be an HF config.json or a folder holding one)")
    hf_id = None
    try:
        config = json.loads(file.read_text())
        hf_id = config.get("_name_or_path") if isinstance(config, dict) else None
    except (OSError, ValueError):
        pass  # the config reader names a bad file when the command reads it
    if not (isinstance(hf_id, str) and "/" in hf_id) and file.name.endswith(CONFIG_SUFFIX) and "--" in file.name:
        hf_id = file.name[: -len(CONFIG_SUFFIX)].replace("--", "/", 1)  # the model-config folders' Org--Name_config.json
    return ModelName(name, hf_id if isinstance(hf_id, str) and "/" in hf_id else None, file)


def resolve_model_name(name: str, *, also: Iterable[str] = ()) -> ModelName:
    """The model a user named: a path to a config (or a folder holding config.json), a lane-spec name, or an
    HF id known to a lane spec, a model config or `also` (e.g. the HuggingFaceIDs of a matrix snapshot).
    HF ids match case-insensitively when that is unambiguous. Unknown: UnknownModel listing close matches."""
    name = name.strip()
    if not name:
        raise UnknownModel("empty model name")
    lanes = lane_models()
    lane_of = {hf: stem for stem, hf in lanes.items()}
    if _looks_like_path(name):
        ref = _from_path(name)
        return ModelName(ref.given, ref.hf_id, ref.config_path, lane_of.get(ref.hf_id))
    if name in lanes:
        return ModelName(name, lanes[name], lane=name)
    ids = sorted(set(lane_of) | set(config_models()) | set(also))
    if name in ids:
        return ModelName(name, name, lane=lane_of.get(name))
    folded = [hf for hf in ids if hf.lower() == name.lower()]
    folded += [hf for stem, hf in lanes.items() if stem.lower() == name.lower() and hf not in folded]
    if len(folded) == 1:
        return ModelName(name, folded[0], lane=lane_of.get(folded[0]))
    raise UnknownModel(unknown_message(name, [*lanes, *ids]))


def unknown_message(name: str, known: Iterable[str]) -> str:
    """`unknown model X; did you mean: a, b, c` (difflib on the whole name and on the part after the org)."""
    known = sorted(set(known))
    by_lower = {k.lower(): k for k in known}
    keys = list(by_lower) + [k.split("/", 1)[-1] for k in by_lower]
    close = []
    for hit in difflib.get_close_matches(name.lower(), keys, n=8, cutoff=0.5):
        full = by_lower.get(hit) or next(v for k, v in by_lower.items() if k.split("/", 1)[-1] == hit)
        if full not in close:
            close.append(full)
    hint = f"did you mean: {', '.join(close[:5])}" if close else f"known: {', '.join(known[:12])}" + (
        " ..." if len(known) > 12 else "")
    return (f"unknown model {name!r}; {hint} (an HF id, a lane-spec name from schemas/lanes/, "
            "or a path to a config.json or a folder holding one)")
