"""Quant profiles and util-level tables, read from quant.yaml (data, not constants in code)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from perfledger.estimator.errors import UnknownQuantError
from perfledger.safe_io import data_yaml

QUANT_YAML = Path(__file__).with_name("quant.yaml")


@dataclass(frozen=True)
class QuantProfile:
    """How one quant is priced: bytes per element, MMA speed-up class, and the FLOP/s dtype used."""

    name: str
    memory: float
    compute: float
    dtype: str

    @property
    def profile(self) -> tuple[float, float]:
        return (self.memory, self.compute)


@cache
def _doc(path: Path = QUANT_YAML) -> dict:
    doc = data_yaml(path)
    for family, body in doc.items():
        for key in ("quants",):
            if key not in body:
                raise ValueError(f"{path}: family {family!r} lacks key {key!r}")
        for quant, spec in body["quants"].items():
            missing = {"memory", "compute", "dtype"} - set(spec)
            if missing:
                raise ValueError(f"{path}: {family}.quants.{quant} lacks key(s) {sorted(missing)}")
    return doc


def _family(family: str) -> dict:
    doc = _doc()
    if family not in doc:
        raise UnknownQuantError(f"no quant table for op family {family!r} in {QUANT_YAML.name}")
    return doc[family]


def quant_profile(family: str, quant: str) -> QuantProfile:
    """Look a quant up; an unknown name is a typed error naming the family and the known quants."""
    quants = _family(family)["quants"]
    if quant not in quants:
        raise UnknownQuantError(f"unknown {family} quant {quant!r}; known: {', '.join(quants)}")
    spec = quants[quant]
    return QuantProfile(quant, float(spec["memory"]), float(spec["compute"]), str(spec["dtype"]))


def util_level(family: str, profile: tuple[float, float]) -> float:
    """e(profile): the calibrated util level of a (memory, compute) profile, default when unlisted."""
    body = _family(family)
    for row in body.get("levels", []):
        if (float(row["memory"]), float(row["compute"])) == profile:
            return float(row["e"])
    return float(body["default_level"])


def profile_distance(family: str, a: tuple[float, float], b: tuple[float, float]) -> tuple[float, ...]:
    """Sort key between two profiles: GEMM compares compute first, MoE uses plain L1."""
    dmem, dcomp = abs(a[0] - b[0]), abs(a[1] - b[1])
    if _family(family).get("profile_distance") == "compute_first":
        return (dcomp, dmem)
    return (dmem + dcomp,)
