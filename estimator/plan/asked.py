"""The planning questions a pipeline config asks (`plans:` in pipeline.yaml), checked and expanded, each with a stable id.

Why: `perfledger run` answers the same questions every time the data changes, and the `plans` table compares each
answer with the previous one of the same question, so a question needs an identity that survives re-ordering the
config and re-running: a hash over its fields (model, system, GPUs, backend, version asked, traffic, SLA, modes, top-N,
database mode, prefix). One config entry names lists of systems and GPU counts and expands to one question per pair.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass

from perfledger.estimator.plan.question import DATABASE_MODES, Question

MODES = {"agg": ("agg",), "disagg": ("disagg",), "all": ("agg", "disagg")}  # --mode / mode: -> modes searched, in order
REQUIRED = ("model", "systems", "total_gpus", "backend", "isl", "osl", "ttft", "tpot")
OPTIONAL = {"version": None, "mode": "all", "top_n": 5, "database_mode": "silicon", "prefix": 0}
ID_CHARS = 12


class PlanConfigError(ValueError):
    """A `plans:` entry that cannot be asked; names the entry and key."""


@dataclass(frozen=True)
class Asked:
    """One question as the pipeline asks it: `model` as configured (a lane spec name or an HF id), the search's
    `question` (its model the HF id, `version` None for the data's current version: question.resolve_version), the
    modes searched and the configs kept per mode."""

    model: str
    question: Question
    mode: str = "all"
    top_n: int = 5

    @property
    def hf_model(self) -> str:
        return str(self.question.model)

    @property
    def id(self) -> str:
        """Stable over runs and config order: a hash of the question, modes and top-N (the HF id, not the spelling)."""
        fields = {**asdict(self.question), "mode": self.mode, "top_n": self.top_n}
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:ID_CHARS]

    @property
    def modes(self) -> tuple[str, ...]:
        return MODES[self.mode]

    @property
    def label(self) -> str:
        """`Qwen/Qwen3-32B on 8 × h200_sxm (vllm current)`: how pages and change notes name the question."""
        q = self.question
        return f"{q.model} on {q.total_gpus} × {q.system} ({q.backend} {q.version or 'current'})"

    def to_json(self) -> dict:
        return {"model": self.model, "question": asdict(self.question), "mode": self.mode, "top_n": self.top_n}

    @classmethod
    def from_json(cls, value: dict) -> Asked:
        return cls(value["model"], Question(**value["question"]), value["mode"], value["top_n"])


def _positive_ints(value: object, where: str) -> list[int]:
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values):
        raise PlanConfigError(f"{where}: {value!r} must be a positive integer or a non-empty list of them")
    return [int(v) for v in values]


def _positive_int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlanConfigError(f"{where}: {value!r} must be a positive integer")
    return value


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise PlanConfigError(f"{where}: {value!r} must be a positive number (ms)")
    return float(value)


def expand(entries: object, hf_id_of: Callable[[str], str], where: str = "plans") -> list[Asked]:
    """Every question of a `plans:` list, checked (`hf_id_of`: configured model name -> HF id, a ValueError when unknown);
    an error names `where[i].key`. Duplicates (the same id twice) are refused: their answers would collide."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise PlanConfigError(f"{where}: must be a list of questions, not {type(entries).__name__}")
    out: dict[str, Asked] = {}
    for i, entry in enumerate(entries):
        at = f"{where}[{i}]"
        if not isinstance(entry, dict):
            raise PlanConfigError(f"{at}: expected a mapping with keys {', '.join(REQUIRED)}")
        unknown = sorted(set(entry) - set(REQUIRED) - set(OPTIONAL))
        if unknown:
            raise PlanConfigError(f"{at}: unknown key(s) {unknown}; known: {sorted({*REQUIRED, *OPTIONAL})}")
        missing = [k for k in REQUIRED if k not in entry]
        if missing:
            raise PlanConfigError(f"{at}: missing key(s) {missing}")
        e = {**OPTIONAL, **entry}
        systems = e["systems"] if isinstance(e["systems"], list) else [e["systems"]]
        if not systems or not all(isinstance(s, str) and s for s in systems):
            raise PlanConfigError(f"{at}.systems: {e['systems']!r} must be a system name or a list of them")
        if e["mode"] not in MODES:
            raise PlanConfigError(f"{at}.mode: {e['mode']!r} is not one of {', '.join(MODES)}")
        if str(e["database_mode"]).lower() not in DATABASE_MODES:
            raise PlanConfigError(f"{at}.database_mode: {e['database_mode']!r} is not one of {', '.join(DATABASE_MODES)}")
        try:
            hf = hf_id_of(str(e["model"]))
        except ValueError as exc:
            raise PlanConfigError(f"{at}.model: {exc}") from None
        isl, osl = _positive_int(e["isl"], f"{at}.isl"), _positive_int(e["osl"], f"{at}.osl")
        ttft, tpot, top_n = _number(e["ttft"], f"{at}.ttft"), _number(e["tpot"], f"{at}.tpot"), _positive_int(e["top_n"],
                                                                                                             f"{at}.top_n")
        prefix = e["prefix"]
        if isinstance(prefix, bool) or not isinstance(prefix, int) or not 0 <= prefix < isl:
            raise PlanConfigError(f"{at}.prefix: {prefix!r} must be a whole number in [0, isl)")
        for system in systems:
            for gpus in _positive_ints(e["total_gpus"], f"{at}.total_gpus"):
                question = Question(hf, system, str(e["backend"]), gpus, isl, osl, ttft, tpot,
                                    version=None if e["version"] is None else str(e["version"]), prefix=prefix,
                                    database_mode=str(e["database_mode"]).lower())
                asked = Asked(str(e["model"]), question, e["mode"], top_n)
                if asked.id in out:
                    raise PlanConfigError(f"{at}: asks {asked.label} a second time")
                out[asked.id] = asked
    return list(out.values())
