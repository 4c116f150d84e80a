"""Build our own support matrix from the warehouse and the estimator (the CLI and the pipeline call this)."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from perfledger.estimator.models.config_expr import ConfigExprError
from perfledger.ledger.matrix.build import build_rows, combinations
from perfledger.ledger.matrix.rules import load_rules
from perfledger.ledger.source import build_cells, read_or_empty
from perfledger.ledger.specs import LaneSpecError, spec_for


class MatrixBuildError(ValueError):
    """The matrix cannot be built: no data, a bad lane spec, or a filter that matches nothing."""

    def __init__(self, message: str, *, usage: bool = False):
        super().__init__(message)
        self.usage = usage


def build_matrix(wh, models: list[str], *, system: str | None = None, backend: str | None = None,
                 version: str | None = None, progress: Callable[[int, int], None] | None = None) -> pl.DataFrame:
    """One matrix row per model × system × backend × version × mode, priced by the estimator.

    Args:
        wh: the warehouse (its `batches` say which partitions exist).
        models: HF ids or lane-spec names.
        system, backend, version: optional filter (replays single rows).
        progress: called as progress(done, total) with the system x backend x version cells priced so far.
    Returns:
        the support-matrix columns plus source_file/source_line, ready for `store_snapshot`.
    """
    from perfledger.estimator.batch import estimate
    from perfledger.estimator.data.sources import WarehouseSource
    from perfledger.estimator.data.system_specs import load_spec
    from perfledger.estimator.session import Estimator

    wanted = (system, backend, version)
    filtered = any(v is not None for v in wanted)
    batches = read_or_empty(wh, "batches")
    if not batches.height:
        raise MatrixBuildError(f"warehouse {wh.root} has no ingested batches; run `perfledger ingest` first")
    partitions = batches.filter(pl.col("status") == "ingested") if "status" in batches.columns else batches
    est = Estimator(WarehouseSource(wh.root))
    rules = load_rules()
    plans = []
    for model in models:
        try:
            spec = spec_for(model)
        except LaneSpecError as exc:
            raise MatrixBuildError(str(exc)) from None
        held = combinations(partitions, spec, rules)
        combos = [c for c in held if all(v is None or c[i] == v for i, v in enumerate(wanted))]
        if filtered and not combos:
            chosen = {k: v for k, v in zip(("system", "backend", "version"), wanted, strict=True) if v}
            listed = ", ".join("/".join(c) for c in held[:12]) + (" ..." if len(held) > 12 else "")
            raise MatrixBuildError(f"{spec.model}: no warehouse partition matches {chosen} "
                                   f"(held on its systems: {listed or 'none'})", usage=True)
        plans.append((spec, combos))
    total, done = sum(len(combos) for _, combos in plans), 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total)

    frames = []
    for spec, combos in plans:
        cells = build_cells(wh, spec)
        lane_rows = {(c["lane"], c["system"], c["backend"], c["version"]): c["rows"] for c in cells.iter_rows(named=True)}
        flops = {s: load_spec(s).flops for s in spec.systems}
        try:
            frames.append(build_rows(spec, combos, lambda op, q, mode: estimate(est, op, q, mode=mode), flops,
                                     lane_rows, rules, on_cell=tick))
        except ConfigExprError as exc:  # needs.yaml and config errors (NeedsError is one)
            raise MatrixBuildError(f"{spec.path.name}: {exc}") from None
    return pl.concat(frames).with_columns(source_file=pl.lit("perfledger"), source_line=pl.int_range(pl.len()) + 1)
