"""0.12.0's deployment planner (the full `aiconfigurator` 0.12.0) as the oracle of the plan parity tests.

`run_default` runs `aiconfigurator cli default` on one question and reads its agg answer; `disagg(...)` runs the
disagg half of it in-process, as the CLI builds it (the default task of the question, its database,
`sweep_disagg`, then `pick_default`), and keeps the prefill / decode worker tables the sweep priced, so each stage
of our search can be compared with the reference's.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

from perfledger.estimator.plan.question import Question

# reference column -> ours (agg rows)
AGG_COLUMNS = {"tokens/s/gpu": "tokens_per_s_per_gpu", "tokens/s/user": "tokens_per_s_per_user", "ttft": "ttft_ms",
               "tpot": "tpot_ms", "request_latency": "request_latency_ms", "concurrency": "concurrency", "bs": "batch",
               "tp": "tp", "pp": "pp", "dp": "dp", "moe_tp": "moe_tp", "moe_ep": "moe_ep", "num_total_gpus": "gpus",
               "global_bs": "global_batch", "seq/s": "seq_per_s", "tokens/s": "tokens_per_s", "ctx_tokens": "ctx_tokens",
               "memory": "memory_gib", "parallel": "parallel"}


def run_default(q: Question, out: Path, with_disagg: bool = False) -> dict[str, pl.DataFrame]:
    """{"top": best_config_topn.csv, "pareto": pareto.csv} of the agg experiment, columns renamed to ours; the run
    searches agg only unless `with_disagg` (then its disagg CSVs are under `out` too)."""
    cli = Path(sys.executable).with_name("aiconfigurator")
    cmd = [str(cli), "cli", "default", "--model-path", str(q.model), "--total-gpus", str(q.total_gpus),
           "--system", q.system, "--backend", q.backend, "--isl", str(q.isl), "--osl", str(q.osl),
           "--ttft", str(q.ttft), "--tpot", str(q.tpot), "--save-dir", str(out), "--log-level", "WARNING"]
    if not with_disagg:
        cmd += ["--serving-mode", "agg"]
    if q.version:
        cmd += ["--backend-version", q.version]
    if q.prefix:
        cmd += ["--prefix", str(q.prefix)]
    if q.nextn:
        cmd += ["--nextn", str(q.nextn), "--nextn-accepted", str(q.nextn_accepted or 0)]
    if q.database_mode != "silicon":
        cmd += ["--database-mode", q.database_mode.upper()]
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "MPLBACKEND": "Agg"}, timeout=1800)
    (agg,) = out.glob("*/*/agg")
    return {name: pl.read_csv(agg / f"{file}.csv").select(list(AGG_COLUMNS)).rename(AGG_COLUMNS)
            for name, file in (("top", "best_config_topn"), ("pareto", "pareto"))}


# 0.12.0's worker tables and replica rows in our column names (workers.py, disagg.py)
WORKER_COLUMNS = {"bs": "batch", "global_bs": "global_batch", "num_total_gpus": "gpus", "ttft": "ttft_ms",
                  "tpot": "tpot_ms", "seq/s": "seq_s", "seq/s/gpu": "seq_s_gpu", "tokens/s/user": "tokens_s_user",
                  "tp": "tp", "pp": "pp", "dp": "dp", "moe_tp": "moe_tp", "moe_ep": "moe_ep", "cp": "cp",
                  "concurrency": "concurrency"}
REPLICA_COLUMNS = {"tokens/s/gpu": "tokens_per_s_per_gpu", "tokens/s/user": "tokens_per_s_per_user", "ttft": "ttft_ms",
                   "tpot": "tpot_ms", "request_latency": "request_latency_ms", "concurrency": "concurrency",
                   "num_total_gpus": "gpus", "(p)workers": "p_workers", "(p)tp": "p_tp", "(p)pp": "p_pp", "(p)dp": "p_dp",
                   "(p)moe_tp": "p_moe_tp", "(p)moe_ep": "p_moe_ep", "(p)cp": "p_cp", "(p)bs": "p_batch",
                   "(d)workers": "d_workers", "(d)tp": "d_tp", "(d)pp": "d_pp", "(d)dp": "d_dp", "(d)moe_tp": "d_moe_tp",
                   "(d)moe_ep": "d_moe_ep", "(d)cp": "d_cp", "(d)bs": "d_batch"}


@dataclass(frozen=True)
class DisaggOracle:
    prefill: list[dict]  # worker tables, our column names
    decode: list[dict]
    replicas: list[dict]  # sweep_disagg's output, in its order
    top: list[dict]  # pick_default's best configs (+ tokens_per_s_per_gpu_cluster)
    pareto: list[dict]
    version: str


CP_COLUMNS = {"cp", "(p)cp", "(d)cp"}  # a frame without one holds cp 1 layouts only (0.12.0's decode side)


def _rows(frame, columns: dict, extra: tuple[str, ...] = ()) -> list[dict]:
    names = {**columns, **{c: c for c in extra}}
    absent = {theirs for theirs in CP_COLUMNS & set(names) if theirs not in frame.columns}
    return [{ours: 1 if theirs in absent else float(r[theirs]) if isinstance(r[theirs], float) else int(r[theirs])
             for theirs, ours in names.items()} for _, r in frame.iterrows()]


def disagg(model: str, total_gpus: int, system: str, backend: str, isl: int, osl: int, ttft: float, tpot: float,
           top_n: int = 5) -> DisaggOracle:
    logging.disable(logging.WARNING)  # the oracle's deprecation and fallback notices
    try:
        from aiconfigurator.cli.main import build_default_tasks
        from aiconfigurator.sdk import sweep
        from aiconfigurator.sdk.picking import pick_default

        tasks = build_default_tasks(model_path=model, total_gpus=total_gpus, system=system, backend=backend, isl=isl,
                                    osl=osl, ttft=ttft, tpot=tpot)
        task = next(t for t in tasks.values() if t.serving_mode == "disagg")
        db = task._load_database(task.prefill_system_name, task.prefill_backend_name, task.prefill_backend_version)
        kwargs = task.sweep_disagg_kwargs(prefill_database=db, decode_database=db)
        tables: dict = {}
        priced = sweep._get_disagg_worker_candidates

        def keep(**kw):
            tables[kw["role"]] = frame = priced(**kw)
            return frame

        sweep._get_disagg_worker_candidates = keep
        try:
            result = sweep.sweep_disagg(**kwargs, predictor=task.predictor,
                                        speculative_profile=task.build_speculative_profile())
        finally:
            sweep._get_disagg_worker_candidates = priced
        picked = pick_default(result, total_gpus, "disagg", target_tpot=tpot, top_n=top_n)
    finally:
        logging.disable(logging.NOTSET)
    cluster = {"tokens/s/gpu_cluster": "tokens_per_s_per_gpu_cluster"}
    return DisaggOracle(_rows(tables["prefill"], WORKER_COLUMNS), _rows(tables["decode"], WORKER_COLUMNS),
                        _rows(result, REPLICA_COLUMNS), _rows(picked["best_config_df"], {**REPLICA_COLUMNS, **cluster}),
                        _rows(picked["pareto_frontier_df"], {**REPLICA_COLUMNS, **cluster}), str(db.version))


KEY = ["parallel", "batch", "ctx_tokens"]
VALUES = ["ttft_ms", "tpot_ms", "tokens_per_s_per_gpu", "tokens_per_s_per_user", "request_latency_ms", "concurrency",
          "seq_per_s", "tokens_per_s", "memory_gib", "global_batch", "gpus"]


def assert_rows_equal(ours: pl.DataFrame, ref: pl.DataFrame, what: str):
    """Same points (parallelism, batch, context budget) in the same order; every value within 1e-4 of 0.12.0's
    3-decimal one (ours rounded as it rounds)."""
    assert ours.select(KEY).rows() == ref.select(KEY).rows(), f"{what}: different points"
    for mine, theirs in zip(ours.iter_rows(named=True), ref.iter_rows(named=True), strict=True):
        for col in VALUES:
            assert round(mine[col], 3) == pytest.approx(theirs[col], rel=1e-4, abs=1e-9), f"{what} {mine['parallel']} {col}"


def planner_engine(model: str, system: str, backend: str, version: str, parallel: tuple, *, isl: int = 4000,
                   osl: int = 500, ttft: float = 2000.0, tpot: float = 30.0, total_gpus: int = 8):
    """(engine handle, model config) 0.12.0's planner builds for a layout (tp, pp, dp, moe_tp, moe_ep, cp) of its agg
    task for the question: the per-op reference of our steps (mixed / decode steps, static prefill passes)."""
    import aiconfigurator_core
    from aiconfigurator.cli.main import build_default_tasks
    from aiconfigurator_core.sdk import engine
    from aiconfigurator_core.sdk.models import get_model

    logging.disable(logging.WARNING)
    try:
        task = next(t for t in build_default_tasks(model_path=model, total_gpus=total_gpus, system=system, backend=backend,
                                                   backend_version=version, isl=isl, osl=osl, ttft=ttft,
                                                   tpot=tpot).values() if t.serving_mode == "agg")
        config = task.build_model_config(role="agg", parallel=parallel)
        spec = engine.build_engine_spec_json(get_model(model, config, backend), model_path=model, system=system,
                                             backend=backend, backend_version=version, nextn=0, kv_block_size=None,
                                             systems_path=None, database=task._load_database(system, backend, version))
        return engine.EngineHandle(bytes(aiconfigurator_core.engine_spec_bincode_from_json(spec))), config
    finally:
        logging.disable(logging.NOTSET)
