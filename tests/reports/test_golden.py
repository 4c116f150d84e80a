"""Rendered pages from fixed inputs match the golden files (PERFLEDGER_UPDATE_GOLDEN=1 rewrites them)."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

from perfledger.estimator.scenarios import estimates_frame
from perfledger.reports.estimate_page import estimate_page
from perfledger.reports.matrix_page import matrix_page
from perfledger.reports.page import Section, Table, render_page
from perfledger.reports.site import index_page
from perfledger.reports.validation import validation_page

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "reports"
NAV = [("index", "Home"), ("matrix", "Support matrix"), ("validation", "Validation report"), ("estimates", "Estimator report")]


def quarantine() -> pl.DataFrame:
    return pl.DataFrame({
        "table": ["gemm_perf", "gemm_perf", "moe_perf"], "system": ["h200_sxm"] * 3, "backend": ["vllm"] * 3,
        "version": ["0.20.0"] * 3, "source_file": ["gemm_perf.txt", "gemm_perf.txt", "moe <b>perf</b>.txt"],
        "source_row": [3, 9, 2], "check": ["latency_positive", "latency_positive", "dtype_float64"],
        "column": ["latency", "latency", "latency"], "value": ["-1", "0", "abc|def"]})


def matrix() -> pl.DataFrame:
    rows = [("moonshotai/Kimi-K3", "K3", "h200_sxm", "vllm", "0.24.0", "agg", "PASS", "", "cmd a", "silicon"),
            ("moonshotai/Kimi-K3", "K3", "h200_sxm", "vllm", "0.24.0", "disagg", "FAIL", "no <moe> rows", "cmd b", ""),
            ("moonshotai/Kimi-K3", "K3", "l40s", "sglang", "0.5.16", "agg", "HW_INCOMPATIBLE", "no fp8", "cmd c", ""),
            ("other/Model", "X", "l40s", "sglang", "0.5.16", "agg", "PASS", "", "cmd d", "silicon")]
    cols = ["HuggingFaceID", "Architecture", "System", "Backend", "Version", "Mode", "Status", "ErrMsg", "Command", "Source"]
    return pl.DataFrame(rows, schema=cols, orient="row")


def estimates() -> pl.DataFrame:
    """A stored pricing, as the `estimates` table holds it."""
    deploy = {"parallelism": "tp8 · ep16 (attention dp2)", "tp": 8, "moe_tp": 1, "moe_ep": 16, "gpus": 16}
    rows = [{"model": "kimi-k3", "scenario": "prefill 4k", "metric": "TTFT", "system": "h200_sxm", "backend": "vllm",
             "version": "0.24.0", "ms": 20.72, "source": "silicon", "error": None, "previous_ms": 20.0,
             "delta_pct": 3.6, "verdict": "ok", **deploy, "batch": 1, "isl": 4096, "osl": 1, "memory_gib": 100.35,
             "capacity_gib": 141.0, "fit": "fits"},
            {"model": "kimi-k3", "scenario": "static 1k/128 bs1", "metric": "TTFT", "system": "l40s", "backend": "vllm",
             "version": "0.24.0", "ms": 11903.5, "source": "hybrid", "error": None, "previous_ms": None,
             "delta_pct": None, "verdict": "new", **deploy, "batch": 1, "isl": 1024, "osl": 128, "memory_gib": 100.07,
             "capacity_gib": 44.99, "fit": "does not fit"},
            {"model": "kimi-k3", "scenario": "decode bs64", "metric": "TPOT", "system": "l40s", "backend": "vllm",
             "version": "0.24.0", "ms": None, "source": None, "error": "gemm: no gemm_perf rows", "previous_ms": None,
             "delta_pct": None, "verdict": "miss", **deploy, "batch": 64, "isl": 1024, "osl": 1, "memory_gib": None,
             "capacity_gib": None, "fit": "unknown"}]
    counts = {"ok": 1, "warn": 0, "fail": 0, "lost": 0, "new": 1, "miss": 1}
    report = {"as_of_previous": "2026-01-01T00:00:00+00:00", "models": {"kimi-k3": "moonshotai/Kimi-K3"},
              "gate": {"status": "pass", "warn_pct": 5.0, "fail_pct": 10.0, "counts": counts, "rows": rows}, "sweeps": {}}
    return estimates_frame(report, priced_at="2026-01-02T00:00:00+00:00", priced_from={"batches": 1}, compared_with=0)


def ours() -> pl.DataFrame:
    """Our built matrix: the h200 agg row fails where the imported one passed (a blocking change)."""
    frame = matrix().with_columns(
        Status=pl.Series(["FAIL", "FAIL", "HW_INCOMPATIBLE", "PASS"]),
        ErrMsg=pl.Series(["lane moe.k3: model does not fit in GPU memory", "no <moe> rows", "no fp8", ""]),
        Command=pl.lit("perfledger matrix build"), Source=pl.Series(["", "", "", "silicon"]))
    return frame


def duplicates() -> pl.DataFrame:
    return pl.DataFrame({"table": ["gemm_perf"] * 3 + ["moe_perf"] * 2, "system": ["h200_sxm"] * 5,
                         "backend": ["vllm"] * 5, "version": ["0.24.0"] * 5, "spread_rel": [0.01, 0.02, 0.03, 0.2, 0.4]})


def pages():
    labels = [{"label": "head", "rows": 4, "imported_at": "2026-01-01T00:00:00", "snapshot_source": "/data/head"}]
    imported = matrix().with_columns(Command=pl.lit("aiconfigurator cli default --total-gpus 128"))
    coverage = [{"op": "gemm", "table": "gemm_perf", "system": "h200_sxm", "backend": "vllm", "version": "0.24.0",
                 "grid_cases": 200, "held": 150, "share": 0.75}]
    built = [matrix_page("head", imported, ["moonshotai/Kimi-K3"], labels, ours()),
             validation_page(quarantine(), [{"source": "/landing/x", "error": "empty file"}], duplicates(), coverage),
             estimate_page(estimates(), [], {("moonshotai/Kimi-K3", "l40s", "vllm", "0.24.0"): "HW_INCOMPATIBLE"},
                           {("moonshotai/Kimi-K3", "h200_sxm", "vllm"): "none on 16 GPUs"})]
    run = {"finished_at": "2026-01-01T00:00:00+00:00", "seconds": 2.5, "warehouse": "/wh",
           "ingest": {"batches": 3, "new_batches": 2, "rows_accepted": 100, "rows_quarantined": 3, "rows_duplicate": 1,
                      "failed_batches": [{"source": "/landing/x", "error": "empty file"}]},
           "stages": [{"stage": "ingest", "status": "ran", "seconds": 1.5},
                      {"stage": "ledger", "status": "skipped", "seconds": 0.0}],
           "deployments": [{"name": "vllm_agg", "folder": "deployments/vllm_agg", "mode": "agg", "files": ["run_0.sh"],
                            "warnings": ["Workers.agg.max_batch_size: the input sets 256, rule production/vllm.rule:7 "
                                         "makes it 512; set preserve_engine_limits: true to keep 256"]}]}
    ledgers = [{"slug": "ledger-kimi-k3", "title": "Ledger: moonshotai/Kimi-K3", "summary": "40 cells"}]
    history = [Section("History: rows per lane", text=["Ledger rows per lane."],
                       table=Table(["version", "committed", "kda"], [[1, "2026-01-02 00:00:00", 1203],
                                                                    [0, "2026-01-01 00:00:00", 976]]))]
    return [index_page(run, built, ledgers, [("plots/coverage-kimi-k3.svg", "coverage")], history), *built]


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_pages_match_golden(fmt: str) -> None:
    update = os.environ.get("PERFLEDGER_UPDATE_GOLDEN") == "1"
    for page in pages():
        path = GOLDEN / f"{page.slug}.{fmt}"
        text = render_page(page, NAV, fmt)
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        assert path.read_text() == text, f"{path} differs (PERFLEDGER_UPDATE_GOLDEN=1 to accept)"


def test_matrix_errors_show_the_tracebacks_last_line() -> None:
    from perfledger.reports.matrix_page import ERR_CHARS, short_error

    stored_traceback = "Traceback (most recent call last):\\n  File \"x.py\"\\nValueError: no moe rows"
    assert short_error(stored_traceback) == "ValueError: no moe rows"
    assert short_error(None) == "" and len(short_error("e" * 1000)) == ERR_CHARS
