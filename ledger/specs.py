"""Lane specs: one YAML per model (package data `perfledger.schemas` lanes/*.yaml) loaded into validated dataclasses.

Every error names the YAML file and the key path, e.g. `kimi-k3.yaml: lanes[1].filter.hidden_sz`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from perfledger.settings import package_file

LANES_DIR = package_file("perfledger.schemas", "lanes")
# Columns every curated table carries besides the catalog's (warehouse lineage).
LINEAGE = ("system", "family", "backend", "version", "row_version", "framework", "batch_id", "source_file",
           "source_row", "ingested_at")


class LaneSpecError(ValueError):
    """A lane spec that cannot be used; the message names the file and key."""


@dataclass(frozen=True)
class ExpectedCell:
    """A backend/version the lane must have, on `systems` (default: the model's systems)."""

    backend: str
    version: str
    systems: tuple[str, ...]


@dataclass(frozen=True)
class Claim:
    """A row count someone asserted for one cell (the ledger checks it against the data)."""

    system: str
    backend: str
    version: str
    rows: int


@dataclass(frozen=True)
class SuffixRule:
    """Rows of an approximating kernel must carry a suffix unless their runtime runs the real activation."""

    suffix: str
    kernels: tuple[str, ...]  # substrings of kernel_source naming the approximating kernels
    native_runtimes: tuple[str, ...]  # row_version prefixes that run the model's activation natively


@dataclass(frozen=True)
class LaneSpec:
    lane_id: str
    table: str
    title: str
    filter: dict[str, Any]
    expect: tuple[ExpectedCell, ...]
    claims: tuple[Claim, ...]
    dtype_column: str | None
    suffix_rule: SuffixRule | None
    key: str  # the YAML key path, for error messages


@dataclass(frozen=True)
class OpNeed:
    """An operator the model needs priced: estimator op, fixed slice keys, value grid (cross product)."""

    op: str
    query: dict[str, Any]
    values: dict[str, tuple]


@dataclass(frozen=True)
class MatrixNeeds:
    """What `matrix build` checks for the model: native dtypes, estimator ops, lanes without an op model."""

    requires: tuple[str, ...] = ()
    ops: tuple[OpNeed, ...] = ()
    lanes: tuple[str, ...] = ()
    quant: dict[str, str] = field(default_factory=dict)  # needs.yaml quant labels: gemm, moe, kv, fmha, comm, ...
    derive: bool = True  # price the ops derived from the model's config (ledger/matrix/needs.yaml)


@dataclass(frozen=True)
class ModelSpec:
    model: str
    architecture: str
    title: str
    systems: tuple[str, ...]
    lanes: tuple[LaneSpec, ...]
    findings: tuple[dict, ...] = ()
    invariants: tuple[dict, ...] = ()
    path: Path = field(default=Path("?"))
    matrix: MatrixNeeds = field(default_factory=MatrixNeeds)

    def lane(self, lane_id: str) -> LaneSpec:
        for lane in self.lanes:
            if lane.lane_id == lane_id:
                return lane
        raise LaneSpecError(f"{self.path.name}: no lane {lane_id!r} (lanes: {', '.join(lane.lane_id for lane in self.lanes)})")


@cache
def catalog_columns() -> dict[str, frozenset[str]]:
    """Table -> every column a curated row of it can carry (catalog keys/metrics + lineage + `_ms` twins)."""
    from perfledger.schemas.catalog import load_catalog

    catalog = load_catalog()
    base = set(catalog.descriptive) | set(LINEAGE)
    return {
        name: frozenset(base | set(t.keys) | set(t.metrics) | set(t.optional) | set(t.renames.values())
                        | {f"{m}_ms" for m in t.microsecond_metrics})
        for name, t in catalog.tables.items()
    }


def _need(raw: dict, key: str, kind: type, where: str) -> Any:
    if key not in raw:
        raise LaneSpecError(f"{where}.{key}: required key missing")
    value = raw[key]
    if not isinstance(value, kind) or (kind is str and not value):
        raise LaneSpecError(f"{where}.{key}: expected {kind.__name__}, got {value!r} (quote versions: \"0.24.0\")")
    return value


def _strings(values: Any, where: str) -> tuple[str, ...]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise LaneSpecError(f"{where}: expected a list of strings, got {values!r}")
    return tuple(values)


def _lane(raw: Any, where: str, systems: tuple[str, ...], columns: dict[str, frozenset[str]]) -> LaneSpec:
    if not isinstance(raw, dict):
        raise LaneSpecError(f"{where}: expected a mapping")
    table = _need(raw, "table", str, where)
    if table not in columns:
        raise LaneSpecError(f"{where}.table: {table!r} is not a table of schemas/catalog.yaml")
    flt = raw.get("filter", {}) or {}
    if not isinstance(flt, dict):
        raise LaneSpecError(f"{where}.filter: expected a mapping column -> value or list of values")
    for col in list(flt) + ([raw["dtype_column"]] if raw.get("dtype_column") else []):
        if col not in columns[table]:
            key = "dtype_column" if col == raw.get("dtype_column") and col not in flt else f"filter.{col}"
            raise LaneSpecError(f"{where}.{key}: column {col!r} does not exist in table {table}")
    expect = []
    for j, cell in enumerate(_need(raw, "expect", list, where)):
        w = f"{where}.expect[{j}]"
        cell_systems = _strings(cell["systems"], f"{w}.systems") if "systems" in cell else systems
        unknown = set(cell_systems) - set(systems)
        if unknown:
            raise LaneSpecError(f"{w}.systems: {sorted(unknown)} not in the model's systems")
        expect.append(ExpectedCell(_need(cell, "backend", str, w), _need(cell, "version", str, w), cell_systems))
    claims = tuple(
        Claim(_need(c, "system", str, f"{where}.claims[{j}]"), _need(c, "backend", str, f"{where}.claims[{j}]"),
              _need(c, "version", str, f"{where}.claims[{j}]"), _need(c, "rows", int, f"{where}.claims[{j}]"))
        for j, c in enumerate(raw.get("claims", []) or [])
    )
    rule = raw.get("suffix_rule")
    suffix_rule = None
    if rule is not None:
        w = f"{where}.suffix_rule"
        suffix_rule = SuffixRule(_need(rule, "suffix", str, w), _strings(rule.get("kernels", []), f"{w}.kernels"),
                                 _strings(rule.get("native_runtimes", []), f"{w}.native_runtimes"))
    return LaneSpec(
        lane_id=_need(raw, "id", str, where), table=table, title=raw.get("title", raw["id"]), filter=dict(flt),
        expect=tuple(expect), claims=claims, dtype_column=raw.get("dtype_column"), suffix_rule=suffix_rule, key=where,
    )


def _matrix(raw: Any, lane_ids: set[str]) -> MatrixNeeds:
    if raw is None:
        return MatrixNeeds()
    if not isinstance(raw, dict):
        raise LaneSpecError("matrix: expected a mapping with requires / quant / ops / lanes / derive")
    ops = []
    for i, need in enumerate(raw.get("ops", []) or []):
        w = f"matrix.ops[{i}]"
        values = need.get("values", {}) if isinstance(need, dict) else None
        if not isinstance(values, dict) or not all(isinstance(v, list) and v for v in values.values()):
            raise LaneSpecError(f"{w}.values: expected a mapping column -> non-empty list")
        ops.append(OpNeed(_need(need, "op", str, w), dict(_need(need, "query", dict, w)),
                          {k: tuple(v) for k, v in values.items()}))
    lanes = _strings(raw.get("lanes", []) or [], "matrix.lanes")
    unknown = sorted(set(lanes) - lane_ids)
    if unknown:
        raise LaneSpecError(f"matrix.lanes: {unknown} are not lanes of this spec")
    quant = raw.get("quant", {}) or {}
    if not isinstance(quant, dict) or not all(isinstance(v, str) for v in quant.values()):
        raise LaneSpecError(f"matrix.quant: expected a mapping role -> quant label, got {quant!r}")
    derive = raw.get("derive", True)
    if not isinstance(derive, bool):
        raise LaneSpecError(f"matrix.derive: expected true or false, got {derive!r}")
    return MatrixNeeds(_strings(raw.get("requires", []) or [], "matrix.requires"), tuple(ops), lanes, dict(quant), derive)


def parse_spec(raw: Any, path: Path, columns: dict[str, frozenset[str]] | None = None) -> ModelSpec:
    """Validate a parsed YAML document; every error is prefixed with the file name."""
    columns = columns or catalog_columns()
    try:
        if not isinstance(raw, dict):
            raise LaneSpecError("top level: expected a mapping")
        systems = _strings(_need(raw, "systems", list, "top"), "systems")
        lanes = tuple(_lane(lane, f"lanes[{i}]", systems, columns) for i, lane in enumerate(_need(raw, "lanes", list, "top")))
        ids = [lane.lane_id for lane in lanes]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise LaneSpecError(f"lanes: duplicate lane id(s) {dup}")
        return ModelSpec(
            model=_need(raw, "model", str, "top"), architecture=_need(raw, "architecture", str, "top"),
            title=raw.get("title", raw["model"]), systems=systems, lanes=lanes,
            findings=tuple(raw.get("findings", []) or []), invariants=tuple(raw.get("invariants", []) or []), path=path,
            matrix=_matrix(raw.get("matrix"), set(ids)),
        )
    except LaneSpecError as exc:
        raise LaneSpecError(f"{path}: {exc}") from None


def load_spec(path: Path) -> ModelSpec:
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as exc:
        raise LaneSpecError(f"{path}: not valid YAML: {exc}") from None
    return parse_spec(raw, Path(path))


def load_all(directory: Path = LANES_DIR) -> list[ModelSpec]:
    return [load_spec(p) for p in sorted(Path(directory).glob("*.yaml"))]


def spec_for(name: str) -> ModelSpec:
    """The lane spec of a model named any way a command accepts (HF id in any case, lane-spec name, config path;
    schemas.model_names); a known model without a lane spec, or an unknown name, is a LaneSpecError saying so."""
    from perfledger.schemas.model_names import UnknownModel, lane_models, resolve_model_name

    try:
        ref = resolve_model_name(name)
    except UnknownModel as exc:
        raise LaneSpecError(str(exc)) from None
    if ref.lane is None:
        raise LaneSpecError(f"{ref.label} has no lane spec in schemas/lanes/ (models with one: "
                            f"{', '.join(f'{stem} ({hf})' for stem, hf in lane_models().items())})")
    return find_spec(ref.lane)


def find_spec(model: str, directory: Path = LANES_DIR) -> ModelSpec:
    """The spec for a model given by HF id or by file stem (e.g. `kimi-k3`). A name with a folder in it is
    only ever an HF id, so no file outside `directory` is read (`../x` is no way to another YAML)."""
    stem = Path(directory) / f"{model}.yaml"
    if Path(model).name == model and stem.is_file():
        return load_spec(stem)
    for spec in load_all(directory):
        if spec.model == model:
            return spec
    raise LaneSpecError(f"no lane spec for model {model!r} in {directory}")
