"""Typed estimator errors: every miss names what is missing, never a fabricated number."""

from __future__ import annotations


class EstimatorError(Exception):
    """Base class; the CLI maps every subclass to exit code 1."""


class NoDataError(EstimatorError):
    """The collected data cannot answer this query (SILICON miss); HYBRID falls through on it."""


class EmpiricalUnavailableError(EstimatorError):
    """EMPIRICAL found neither an own util grid nor a transfer reference."""


class UnknownSystemError(EstimatorError):
    """No system spec YAML for the requested system."""


class UnknownQuantError(EstimatorError):
    """The quant name is not in quant/quant.yaml for this op family."""


class MissingFlopsError(EstimatorError):
    """The system spec has no positive tensor-core FLOP/s for the quant's compute dtype."""


class UnsupportedModelError(EstimatorError):
    """The model's layer needs op families (tables) the static assembler does not price yet."""
