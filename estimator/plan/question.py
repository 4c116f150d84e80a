"""The planning question: which model, on how many GPUs of which system and backend, for what traffic and SLA."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from perfledger import settings
from perfledger.estimator.errors import NoDataError
from perfledger.estimator.models.config import ModelConfig
from perfledger.estimator.quant.checkpoint import check_planner_checkpoint, planner_moe
from perfledger.estimator.quant.checkpoint import resolve as resolve_quants
from perfledger.estimator.quant.context_fmha import resolve_by_data
from perfledger.safe_io import data_yaml
from perfledger.versions import version_key

DATABASE_MODES = ("silicon", "hybrid")
QUERY_VERSIONS = "query_versions.yaml"  # 0.12.0's queryable version slots per (system, framework)


class QuestionError(ValueError):
    """A question that cannot be asked (bad sizes, unknown database mode); the CLI maps it to a usage error."""


@dataclass(frozen=True)
class Question:
    """One planning question, as `aiconfigurator cli default` takes it (ttft / tpot in ms).

    `version` None: the data's `current` version slot for the system and backend (`resolve_version`)."""

    model: str | ModelConfig
    system: str
    backend: str
    total_gpus: int
    isl: int
    osl: int
    ttft: float
    tpot: float
    version: str | None = None
    prefix: int = 0  # cached prefix tokens of every request (part of isl)
    nextn: int = 0  # MTP draft tokens per decode step
    nextn_accepted: float | None = None  # mean accepted draft tokens per decode step (0..nextn); None: 0
    database_mode: str = "silicon"
    gemm_quant: str | None = None
    moe_quant: str | None = None
    kv_quant: str | None = None
    fmha_quant: str | None = None

    def __post_init__(self):
        if min(self.total_gpus, self.isl, self.osl) < 1:
            raise QuestionError(f"total_gpus, isl and osl must be >= 1 (got {self.total_gpus}, {self.isl}, {self.osl})")
        if not 0 <= self.prefix < self.isl:
            raise QuestionError(f"prefix must be in [0, isl) (got {self.prefix}, isl {self.isl})")
        if self.nextn < 0 or self.ttft <= 0 or self.tpot <= 0:
            raise QuestionError(f"nextn must be >= 0 and ttft, tpot > 0 (got {self.nextn}, {self.ttft}, {self.tpot})")
        if self.nextn_accepted is not None and not 0 <= self.nextn_accepted <= self.nextn:
            raise QuestionError(f"nextn_accepted must be in [0, nextn {self.nextn}] (got {self.nextn_accepted})")
        if self.database_mode not in DATABASE_MODES:
            raise QuestionError(f"database mode {self.database_mode!r}: one of {', '.join(DATABASE_MODES)}")

    @property
    def decode_progress(self) -> float:
        """Output tokens a decode step commits per request: 1 + the accepted draft tokens."""
        return 1.0 + (self.nextn_accepted or 0.0)

    @property
    def quants(self) -> dict[str, str | None]:
        return {"gemm": self.gemm_quant, "moe": self.moe_quant, "kv": self.kv_quant, "fmha": self.fmha_quant}


def role_quants(est, config: ModelConfig, q: Question, *, context: bool) -> dict[str, dict[str, str]]:
    """The quants 0.12.0's planner prices a role at: the flags, else the checkpoint without its model builder's FMHA
    guards and with its planner's MoE lane per GPU generation (quant/checkpoint.planner_moe); a context-using role
    (agg, prefill) then settles an inferred fp8 FMHA by the data (quant/context_fmha.py), a decode role keeps it (no
    generation table keys on FMHA). A checkpoint its planner refuses on the GPU generation is refused."""
    quants, sm_version = resolve_quants(config, q.backend, q.quants, builder_guards=False), est.spec(q.system).sm_version
    check_planner_checkpoint(config, sm_version)
    quants = planner_moe(quants, config, q.backend, sm_version)
    if not context:
        return quants
    return resolve_by_data(quants, config.architecture, est, q.system, q.backend, q.version,
                           shared=q.database_mode in DATABASE_MODES)


def resolve_version(source, q: Question) -> Question:
    """The question with its backend version set: as given, else the `current` slot of query_versions.yaml (beside the
    data, else the installed wheel's: the version 0.12.0 plans against by default), else the newest version with GEMM
    data."""
    if q.version is not None:
        return q
    current = _current_slot(source, q.system, q.backend)
    if current is not None:
        return replace(q, version=current)
    versions = source.versions(q.system, "gemm", q.backend)
    if not versions:
        raise NoDataError(f"{source.describe()}: no gemm data for {q.system} / {q.backend}; name --version")
    return replace(q, version=max(versions, key=version_key))


def _current_slot(source, system: str, backend: str) -> str | None:
    wheel = settings.aic_package_dir()
    for folder in (source.manifest_dir(), wheel / "systems" if wheel else None):
        path = Path(folder) / QUERY_VERSIONS if folder is not None else None
        if path is not None and path.is_file():
            doc = data_yaml(path) or {}
            slot = (doc.get("overrides") or {}).get(system, {}).get(backend) or (doc.get("defaults") or {}).get(backend)
            return str(slot["current"]) if slot and slot.get("current") else None
    return None
