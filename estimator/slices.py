"""What data an op can answer from: its table's slices (exact-match columns) and grid ranges (swept axes).

`perfledger slices OP` lists them; `estimate OP --explain-miss` uses `explain_miss` to say, when a query finds
no data, which slices are nearest (which tp/ep, which quant), where the query falls outside a grid range,
and that `--mode hybrid` can transfer from a neighbour. Which columns are slices and which are axes is data
(slices.yaml), per op.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import polars as pl
import yaml

from perfledger.estimator.errors import EstimatorError

SLICES_YAML = Path(__file__).with_name("slices.yaml")


@cache
def slice_specs() -> dict[str, dict]:
    """slices.yaml: op -> {table, slice: {option: column}, axes: {column: option | None}, nccl}."""
    return yaml.safe_load(SLICES_YAML.read_text())


def _spec(op: str) -> dict:
    specs = slice_specs()
    if op not in specs:
        raise EstimatorError(f"no slice layout for op {op!r}; known: {', '.join(specs)}")
    return specs[op]


def op_rows(est, op: str, system: str, backend: str | None, version: str | None) -> pl.DataFrame:
    """The rows the op reads on this system/backend/version (own, donor and earlier versions; NCCL per system)."""
    spec = _spec(op)
    if spec.get("nccl"):
        return est.table(system, "nccl", est.spec(system).nccl_version, spec["table"], shared=False, dedupe=False)
    if not (backend and version):
        raise EstimatorError(f"{op}: give --backend and --version (the {spec['table']} data is per backend version)")
    return est.table(system, backend, version, spec["table"], shared=True)


def op_slices(est, op: str, system: str, backend: str | None, version: str | None,
              where: dict | None = None) -> pl.DataFrame:
    """One row per slice: its slice columns, rows, `from` (the versions whose rows answer: own, reuse donor,
    earlier version or lender), and per axis `<axis>_min`, `<axis>_max`, `<axis>_points`; `where` (option ->
    value) keeps the slices that match it."""
    spec = _spec(op)
    rows = op_rows(est, op, system, backend, version)
    columns = [c for c in spec["slice"].values() if c in rows.columns]
    axes = [a for a in spec["axes"] if a in rows.columns]
    for option, value in (where or {}).items():
        column = spec["slice"].get(option)
        if column in columns and value is not None:
            rows = rows.filter(pl.col(column).cast(pl.String) == str(value))
    aggs = [pl.len().alias("rows")]
    if "_source_version" in rows.columns:  # which version's rows answer (own, a donor, an earlier one, a lender)
        aggs.append(pl.col("_source_version").cast(pl.String).unique().sort().str.join(",").alias("from"))
    for axis in axes:
        aggs += [pl.col(axis).min().alias(f"{axis}_min"), pl.col(axis).max().alias(f"{axis}_max"),
                 pl.col(axis).n_unique().alias(f"{axis}_points")]
    if not columns:
        return rows.select(aggs)
    return rows.group_by(columns).agg(aggs).sort(columns)


def explain_miss(est, op: str, query: dict, mode: str) -> dict:
    """Why a query found no data: the slices nearest to it (most slice columns equal), the columns where they
    differ with the values that exist, the query's axis values outside the nearest slice's ranges, and a hint."""
    spec = _spec(op)
    slices = op_slices(est, op, query["system"], query.get("backend"), query.get("version"))
    mapped = {option: column for option, column in spec["slice"].items()
              if column in slices.columns and query.get(option) is not None}
    if not slices.height:
        return {"op": op, "table": spec["table"], "slices": 0, "nearest": [], "differs": {}, "outside": {},
                "hint": f"no {spec['table']} rows at all here; `perfledger tables --table {spec['table']}` lists where some are"}
    same = [pl.col(c).cast(pl.String) == str(query[o]) for o, c in mapped.items()]
    scored = slices.with_columns(matches=pl.sum_horizontal(same) if same else pl.lit(0))
    best = scored.filter(pl.col("matches") == scored["matches"].max()).drop("matches")
    differs = {o: sorted({str(v) for v in best[c].to_list()} - {str(query[o])}, key=_natural) for o, c in mapped.items()}
    differs = {o: v for o, v in differs.items() if v}
    outside = {}
    if not differs:  # the slice exists: the query is off its grid
        for axis, option in spec["axes"].items():
            if option and query.get(option) is not None and f"{axis}_min" in best.columns:
                lo, hi = best[f"{axis}_min"].min(), best[f"{axis}_max"].max()
                if not lo <= query[option] <= hi:
                    outside[option] = [lo, hi]
    hint = _hybrid_hint(est, op, query) if mode == "silicon" else (
        f"--mode {mode} finds no neighbour either; query a slice that exists (see nearest)")
    return {"op": op, "table": spec["table"], "slices": slices.height, "nearest": best.head(10).to_dicts(),
            "differs": differs, "outside": outside, "hint": hint}



def _hybrid_hint(est, op: str, query: dict) -> str:
    """Whether `--mode hybrid` (a transfer from a neighbour slice) answers the query, and with what."""
    from perfledger.estimator.batch import estimate

    try:
        answer = estimate(est, op, pl.DataFrame({k: [v] for k, v in query.items()}), mode="hybrid").row(0, named=True)
    except EstimatorError:
        return "--mode hybrid finds no neighbour to transfer from either; query a slice that exists (see nearest)"
    return f"--mode hybrid answers it: {answer['latency_ms']:.4g} ms (source {answer['source']})"


def _natural(value: str) -> tuple:
    """Numbers in numeric order, then text."""
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)
