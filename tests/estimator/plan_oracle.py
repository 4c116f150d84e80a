"""Run `aiconfigurator cli default` (0.12.0's deployment planner) on one question and read its agg answer."""

from __future__ import annotations

import os
import subprocess
import sys
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


def run_default(q: Question, out: Path) -> dict[str, pl.DataFrame]:
    """{"top": best_config_topn.csv, "pareto": pareto.csv} of the agg experiment, columns renamed to ours."""
    cli = Path(sys.executable).with_name("aiconfigurator")
    cmd = [str(cli), "cli", "default", "--model-path", str(q.model), "--total-gpus", str(q.total_gpus),
           "--system", q.system, "--backend", q.backend, "--isl", str(q.isl), "--osl", str(q.osl),
           "--ttft", str(q.ttft), "--tpot", str(q.tpot), "--save-dir", str(out), "--log-level", "WARNING"]
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
