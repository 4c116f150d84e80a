"""OpModel base: the mode ladder (SOL, SILICON, HYBRID, EMPIRICAL) shared by every op family.

A variant supplies `sol`, `silicon` and `empirical` over one slice (a group of queries with the same
system/backend/version/quant...); the base runs the modes and labels each answer's provenance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError

MODES = ("silicon", "hybrid", "empirical", "sol")
SHARED_MODES = ("silicon", "hybrid")  # the modes that read the shared layer (donor and earlier versions' rows)
TIERS = ("sol", "silicon", "empirical", "xshape", "xquant", "xprofile", "xop")  # xop: another op's util (MSA <- DSA)


class Queries(dict):
    """One slice's query columns as numpy arrays (column name -> array), all of one length."""

    @property
    def height(self) -> int:
        return len(next(iter(self.values()))) if self else 0

    def take(self, rows: np.ndarray) -> Queries:
        return Queries({c: v[rows] for c, v in self.items()})

    def memo(self, key: tuple, build):
        """A value derived from these columns (e.g. a roofline that two hooks need), built once."""
        cache = self.__dict__.setdefault("_memo", {})
        if key not in cache:
            cache[key] = build()
        return cache[key]


@dataclass
class Answer:
    """Per-query arrays for one slice; `source` holds indices into TIERS; `energy` (W·ms) NaN where no measured
    power prices the answer (None: none does)."""

    latency: np.ndarray
    sol: np.ndarray
    source: np.ndarray
    energy: np.ndarray | None = None


def tier_codes(label: str, n: int) -> np.ndarray:
    return np.full(n, TIERS.index(label), dtype=np.int8)


class OpModel:
    """Subclasses set name/group_keys/value_columns and implement the three hooks."""

    name: str = ""
    tables: tuple[str, ...] = ()  # the perf tables this op reads, the one it measures first
    group_keys: tuple[str, ...] = ()
    value_columns: tuple[str, ...] = ()
    defaults: dict = {}  # optional query columns and the value an absent column takes

    @property
    def table(self) -> str:
        """The perf table this op measures (its first declared table)."""
        return self.tables[0]

    def sol(self, est, key: dict, q: Queries) -> np.ndarray:
        raise NotImplementedError

    def silicon(self, est, key: dict, q: Queries) -> tuple[np.ndarray, np.ndarray]:
        """(latency, miss mask); raise NoDataError when the whole slice is absent."""
        raise NotImplementedError

    def empirical(self, est, key: dict, q: Queries, shared: bool = False) -> tuple[np.ndarray, str]:
        """(latency, provenance label); raise EmpiricalUnavailableError when nothing can be borrowed.

        shared=False (EMPIRICAL) reads the own version only; HYBRID's fallback passes True and sees the
        shared layer the SILICON lookup used.
        """
        raise EmpiricalUnavailableError(f"{self.name}: EMPIRICAL mode is not available for this op")

    def energy(self, est, key: dict, q: Queries, latency: np.ndarray) -> np.ndarray | None:
        """Energy (W·ms) of silicon answers `latency`: measured power interpolated as 0.12.0 does × the kernel's
        latency; NaN per query (None for all) where the rows hold no power. Ops without power columns keep None."""
        return None

    def describe(self, key: dict, q: Queries, row: int) -> str:
        coords = ", ".join(f"{c}={q[c][row]}" for c in self.value_columns)
        where = "/".join(str(key[c]) for c in self.group_keys)
        return f"{self.name} {where} at {coords}"

    def evaluate(self, est, key: dict, q: Queries, mode: str) -> Answer:
        """Answer every query of one slice in `mode`; a miss is a NoDataError naming the query."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        sol = self.sol(est, key, q)
        n = q.height
        if mode == "sol":
            return Answer(sol, sol, tier_codes("sol", n))
        if mode == "empirical":
            lat, label = self.empirical(est, key, q)
            return Answer(lat, sol, tier_codes(label, n))
        try:
            lat, miss = self.silicon(est, key, q)
            reason = None
        except NoDataError as exc:
            lat, miss, reason = np.full(n, np.nan), np.ones(n, dtype=bool), str(exc)
        labels = tier_codes("silicon", n)
        energy = None if miss.all() else self.energy(est, key, q, lat)
        if miss.any():
            first = int(np.flatnonzero(miss)[0])
            message = reason or f"no silicon data can anchor {self.describe(key, q, first)}"
            if mode == "silicon":
                raise NoDataError(message)
            rows = np.flatnonzero(miss)
            try:
                elat, elabel = self.empirical(est, key, q.take(rows), shared=True)
            except EmpiricalUnavailableError as exc:
                raise EmpiricalUnavailableError(f"{message}; empirical fallback: {exc}") from exc
            lat = lat.copy()
            lat[rows] = elat
            labels[rows] = TIERS.index(elabel)
            if energy is not None:  # 0.12.0 reports no energy for empirical answers
                energy = energy.copy()
                energy[rows] = np.nan
        return Answer(lat, sol, labels, energy)
