"""Build our own support matrix from the warehouse and the estimator (the CLI and the pipeline call this)."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from perfledger.ledger.matrix.build import combinations, search_rows
from perfledger.ledger.matrix.rules import load_rules
from perfledger.ledger.source import read_or_empty
from perfledger.ledger.specs import LaneSpecError, spec_for


class MatrixBuildError(ValueError):
    """The matrix cannot be built: no data, a bad lane spec, or a filter that matches nothing."""

    def __init__(self, message: str, *, usage: bool = False):
        super().__init__(message)
        self.usage = usage


def build_matrix(wh, models: list[str], *, system: str | None = None, backend: str | None = None,
                 version: str | None = None, progress: Callable[[int, int], None] | None = None) -> pl.DataFrame:
    """One matrix row per model × system × backend × version × mode, decided by the deployment search (one
    estimator for every row, so loaded tables are read once; each cell's answers are cached across modes).

    Args:
        wh: the warehouse (its `batches` say which partitions exist).
        models: HF ids or lane-spec names.
        system, backend, version: optional filter (replays single rows).
        progress: called as progress(done, total) with the system x backend x version cells priced so far.
    Returns:
        the support-matrix columns plus source_file/source_line, ready for `store_snapshot`.
    """
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
        flops = {s: load_spec(s).flops for s in spec.systems}
        frames.append(search_rows(spec, combos, row_search(est, spec.model, rules.search), flops, rules, on_cell=tick))
    return pl.concat(frames).with_columns(source_file=pl.lit("perfledger"), source_line=pl.int_range(pl.len()) + 1)


def row_search(est, model: str, question: dict):
    """`outcome(cell, mode, database_mode)` for search_rows: the feasibility search of `model` on the cell, asked
    with rules.yaml `search`'s question, memoised per (cell, mode, database mode)."""
    from perfledger.estimator.plan.feasible import feasible
    from perfledger.estimator.plan.question import Question

    memo: dict = {}

    def outcome(cell: tuple[str, str, str], mode: str, database_mode: str):
        key = (cell, mode, database_mode)
        if key not in memo:
            system, backend, version = cell
            q = Question(model, system, backend, int(question["total_gpus"]), int(question["isl"]), int(question["osl"]),
                         float(question["ttft"]), float(question["tpot"]), version=version,
                         prefix=int(question["prefix"]), database_mode=database_mode)
            memo[key] = feasible(est, q, mode)
        return memo[key]

    return outcome
