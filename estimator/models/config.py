"""The one HF-config reader: where a model's config.json is, what it says, and the ModelOpt sidecar beside it.

Every consumer (static plans, memory, DSA prefill, MLA module rows, the matrix needs, checkpoint quants) reads a
model through here, so a user-given `--model-config PATH` and a looked-up `--model` name behave the same.
Names are looked up as `<org>--<name>_config.json` in `settings.model_config_dirs()` (the installed wheel's
model_configs/, then the reference data's); a path is an HF `config.json` or a folder holding one.
`model_dims` turns a config into the typed `ModelDims` through models.yaml's `dims` map (config key -> dim).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from perfledger import settings
from perfledger.estimator.errors import EstimatorError
from perfledger.estimator.models.config_expr import ConfigExprError
from perfledger.safe_io import data_yaml

MODELS_YAML = Path(__file__).with_name("models.yaml")


@dataclass(frozen=True)
class ModelConfig:
    """One model's HF config: `name` (HF id or the path given), the file, its JSON and the hf_quant section."""

    name: str
    path: Path
    config: dict
    hf_quant: dict  # `quantization` of the *_hf_quant_config.json beside the config, or {}

    @property
    def text(self) -> dict:
        """The language model's block (`text_config` of a multimodal config, else the config itself)."""
        return self.config.get("text_config") or self.config

    @property
    def architecture(self) -> str:
        return (self.config.get("architectures") or self.text.get("architectures") or ["?"])[0]


def hf_quant_path(config_path: Path) -> Path:
    """The ModelOpt sidecar: `<stem>_hf_quant_config.json` beside `<stem>_config.json`, `hf_quant_config.json`
    beside an HF folder's `config.json`."""
    name = config_path.name
    sidecar = "hf_quant_config.json" if name == "config.json" else name.replace("_config.json", "_hf_quant_config.json")
    return config_path.with_name(sidecar)


def read_config(path: Path, name: str | None = None) -> ModelConfig:
    """Parse a config.json and its sidecar; a file that is not a JSON object is an error naming it."""
    try:
        config = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise EstimatorError(f"{path}: not a readable HF config.json ({exc})") from None
    if not isinstance(config, dict):
        raise EstimatorError(f"{path}: an HF config.json must hold a JSON object")
    sidecar = hf_quant_path(Path(path))
    hf = json.loads(sidecar.read_text()).get("quantization") if sidecar.is_file() else None
    return ModelConfig(name or str(path), Path(path), config, hf if isinstance(hf, dict) else {})


def config_file(name: str) -> Path:
    """`<org>--<name>_config.json` for 'Org/Model' (or 'Org--Model') from the first model-config folder holding it."""
    stem = name.replace("/", "--")
    dirs = settings.model_config_dirs()
    for folder in dirs:
        if (folder / f"{stem}_config.json").is_file():
            return folder / f"{stem}_config.json"
    raise EstimatorError(f"no model config {stem}_config.json in {', '.join(map(str, dirs)) or 'any model-config folder'}"
                         " (install the aic extra, set --reference-data, or pass --model-config PATH)")


@cache
def model_config(name: str) -> ModelConfig:
    """A named model's config (looked up once per process)."""
    return read_config(config_file(name), name)


def model_config_at(path: str | Path, name: str | None = None) -> ModelConfig:
    """`--model-config PATH`: an HF config.json, or a folder with one; anything else is an error naming the path.
    `name` labels the model (default: the path)."""
    given = Path(path).expanduser()
    file = given / "config.json" if given.is_dir() else given
    if not file.is_file():
        what = "holds no config.json" if given.is_dir() else "does not exist"
        raise EstimatorError(f"--model-config {path}: {what} (expected an HF config.json or a folder with one)")
    return read_config(file, name)


def resolve_model(model: str | ModelConfig) -> ModelConfig:
    """A ModelConfig as given, or the named model's."""
    return model if isinstance(model, ModelConfig) else model_config(model)


def config_dims(config: dict, source: str, fields: dict[str, list], spec: str) -> dict[str, Any]:
    """A YAML `dims` map (dim -> config keys tried in order, `len(key)` a list's length, a number = default) resolved
    against an HF config, its text_config first when nested; `spec` names the YAML in errors. head_dim 0 means
    hidden // heads."""
    layers = [config.get("text_config") or {}, config]
    dims: dict[str, Any] = {}
    for dim, keys in fields.items():
        for key in keys:
            if not isinstance(key, str):
                dims[dim] = key
                break
            name = key[4:-1] if key.startswith("len(") and key.endswith(")") else key
            hit = next((layer[name] for layer in layers if layer.get(name) is not None), None)
            if name != key:  # len(name): the length of a list
                hit = len(hit) if isinstance(hit, list) else None
            if hit is not None:
                dims[dim] = hit
                break
        else:
            raise ConfigExprError(f"{source}: none of {keys} present ({spec} dims.{dim})")
    if not dims.get("head_dim"):
        dims["head_dim"] = dims["hidden"] // dims["heads"]
    return dims


@cache
def catalog() -> dict:
    """models.yaml: the dims map, the architectures (plan kind + parameters), decode stride, unsupported ones."""
    return data_yaml(MODELS_YAML)


@dataclass(frozen=True)
class ModelDims:
    """A model's shape, one field per entry of models.yaml's `dims` map (tests/estimator/test_model_dims.py keeps
    the two in step), so plans and the memory model read typed attributes; 0 where the config has no such part."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int  # hidden // heads where the config gives none
    layers: int
    vocab: int
    inter: int  # dense MLP width
    experts: int  # routed experts
    topk: int
    moe_inter: int
    shared: int  # shared experts
    q_lora: int
    kv_lora: int
    rope_dim: int
    nope_dim: int
    v_head_dim: int
    index_heads: int  # DSA indexer
    index_head_dim: int


def model_dims(model: ModelConfig) -> ModelDims:
    """The model's dims from its HF config through models.yaml's `dims` map (a missing key: ConfigExprError)."""
    return ModelDims(**config_dims(model.config, str(model.path), catalog()["dims"], MODELS_YAML.name))
