"""Case grids from YAML: shared sweeps crossed axis by axis, model shapes kept correlated, stable task ids."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml


class CaseGridError(ValueError):
    """A case grid file is malformed (the message names the file and key)."""


@dataclass(frozen=True)
class Task:
    """One unit of work: an op applied to one canonical case."""

    op: str
    case: tuple[tuple[str, Any], ...]  # canonical, sorted by column name

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.case)

    @property
    def task_id(self) -> str:
        return task_id(self.op, self.params)

    def label(self) -> str:
        return f"{self.op}:" + ",".join(f"{k}={v}" for k, v in self.case)


@dataclass(frozen=True)
class CaseGrid:
    name: str
    columns: tuple[str, ...]
    warmup: int
    runs: int
    cases: tuple[dict, ...]


def canonical(case: dict[str, Any]) -> str:
    """Canonical JSON of a case: key order, YAML spelling and int/float formatting do not matter."""
    norm = {k: (int(v) if isinstance(v, float) and v.is_integer() else v) for k, v in case.items()}
    return json.dumps(norm, sort_keys=True, separators=(",", ":"))


def task_id(op: str, case: dict[str, Any]) -> str:
    """Stable id `<op>:<sha256 prefix>` of the canonical case (survives formatting changes)."""
    digest = hashlib.sha256(f"{op}\n{canonical(case)}".encode()).hexdigest()[:20]
    return f"{op}:{digest}"


def plan_hash(ids: list[str] | set[str]) -> str:
    """Hash of the attempted case set (sorted unique task ids)."""
    return "sha256:" + hashlib.sha256("\n".join(sorted(set(ids))).encode()).hexdigest()


def _expand(block: Any, columns: tuple[str, ...], where: str) -> list[dict]:
    if not isinstance(block, dict):
        raise CaseGridError(f"{where}: expected a mapping of column -> value(s), got {type(block).__name__}")
    missing = [c for c in columns if c not in block]
    extra = [c for c in block if c not in columns]
    if missing or extra:
        raise CaseGridError(f"{where}: columns must be exactly {list(columns)}; missing {missing}, unknown {extra}")
    axes = [block[c] if isinstance(block[c], list) else [block[c]] for c in columns]
    for col, values in zip(columns, axes, strict=True):
        if not values:
            raise CaseGridError(f"{where}.{col}: empty value list")
    return [dict(zip(columns, combo, strict=True)) for combo in itertools.product(*axes)]


def parse_grid(doc: Any, name: str, source: str) -> CaseGrid:
    """Expand a grid document: dedup(expand(sweeps) ∪ expand(model shapes)), first occurrence kept."""
    if not isinstance(doc, dict) or "columns" not in doc:
        raise CaseGridError(f"{source}: top-level key 'columns' is required")
    columns = tuple(doc["columns"])
    timing = doc.get("timing") or {}
    blocks: list[tuple[str, Any]] = [(f"{source}: sweeps[{i}]", b) for i, b in enumerate(doc.get("sweeps") or [])]
    for model, shapes in (doc.get("models") or {}).items():
        if not isinstance(shapes, list):
            raise CaseGridError(f"{source}: models.{model} must be a list of shape mappings")
        blocks += [(f"{source}: models.{model}[{i}]", b) for i, b in enumerate(shapes)]
    seen: dict[str, dict] = {}
    for where, block in blocks:
        for case in _expand(block, columns, where):
            seen.setdefault(canonical(case), case)
    try:
        warmup, runs = int(timing.get("warmup", 3)), int(timing.get("runs", 7))
    except (TypeError, ValueError) as exc:
        raise CaseGridError(f"{source}: timing: {exc}") from exc
    if runs < 1 or warmup < 0:
        raise CaseGridError(f"{source}: timing: runs must be >= 1 and warmup >= 0")
    return CaseGrid(name=name, columns=columns, warmup=warmup, runs=runs, cases=tuple(seen.values()))


def load_grid(name: str, path: Path | None = None) -> CaseGrid:
    """Load `collector/cases/<name>.yaml` (or an explicit file)."""
    if path is None:
        text = resources.files("perfledger.collector").joinpath("cases", f"{name}.yaml").read_text()
        source = f"collector/cases/{name}.yaml"
    else:
        text, source = Path(path).read_text(), str(path)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CaseGridError(f"{source}: invalid YAML: {exc}") from exc
    return parse_grid(doc, name, source)


def select_tasks(
    op: str,
    grid: CaseGrid,
    *,
    dtype_field: str,
    dtypes: tuple[str, ...],
    dtype_min_sm: dict[str, int],
    sm: int | None,
    case_filters: tuple[str, ...] = (),
    limit: int | None = None,
) -> list[Task]:
    """Cases this backend can run: allowed dtypes, SM floors, `--case-filter` substrings (OR), then `--limit`."""
    tasks = []
    for case in grid.cases:
        dtype = case.get(dtype_field)
        if dtype not in dtypes:
            continue
        if sm is not None and sm < dtype_min_sm.get(dtype, 0):
            continue
        task = Task(op=op, case=tuple(sorted(case.items())))
        if case_filters and not any(f in task.label() for f in case_filters):
            continue
        tasks.append(task)
    return tasks[:limit] if limit is not None else tasks
