"""A published site over a small real warehouse, built with the pipeline's own stage functions."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def published_site(tmp_path_factory, shared_tree: Path) -> dict:
    """Ingest kda + an h200 vLLM 0.24.0 slice (GEMM, attention, comm: what planning Qwen3-32B reads), derive, import a
    matrix, estimate, plan (Qwen3-32B answered, Kimi-K3 refused), generate, publish (no Prefect)."""
    from perfledger.estimator.plan.asked import expand
    from perfledger.estimator.scenarios import DEFAULT_SCENARIOS
    from perfledger.flows.config import plan_model
    from perfledger.flows.tasks import estimate_task, generate_task, ledger_task, matrix_task, plan_task, publish_task
    from perfledger.generator.api import held_versions
    from perfledger.ledger.hooks import on_ingest
    from perfledger.settings import package_file
    from perfledger.warehouse.ingest import ingest
    from perfledger.warehouse.store import Warehouse

    base = tmp_path_factory.mktemp("site")
    root, out = base / "wh", base / "out"
    h200 = shared_tree / "h200_sxm"
    sources = [str(shared_tree / "b200_sxm" / "kda"), str(h200 / "gemm" / "vllm" / "0.24.0"),
               *(str(h200 / table / "vllm" / "0.24.0") for table in ("attention", "comm")), str(h200 / "comm" / "nccl")]
    report = ingest(sources, Warehouse(root), on_commit=on_ingest).to_json()
    ledgers = [ledger_task.fn(str(root), "kimi-k3")]
    matrix = matrix_task.fn(str(root), [{"path": str(REPO / ".." / "shared" / "aic" / "support_matrix" / "head-095f58a"),
                                         "label": "head"}], ["kimi-k3"])
    gate = {"warn_pct": 5.0, "fail_pct": 10.0}
    estimates = estimate_task.fn(str(root), str(DEFAULT_SCENARIOS), ["kimi-k3"], gate)
    asked = [a.to_json() for a in expand([{"model": m, "systems": ["h200_sxm"], "total_gpus": [gpus], "backend": "vllm",
                                           "version": "0.24.0", "isl": 4000, "osl": 500, "ttft": 2000, "tpot": 30}
                                          for m, gpus in (("Qwen/Qwen3-32B", 8), ("kimi-k3", 16))], plan_model)]
    plans = plan_task.fn(str(root), str(out), asked, gate, held_versions(str(root)))
    deployments = [generate_task.fn(str(package_file("perfledger.generator", "examples", "vllm_agg.yaml")), str(out),
                                       held_versions(str(root)))]
    run = {"finished_at": "2026-01-01T00:00:00+00:00", "seconds": 1.0, "warehouse": str(root), "sources": sources,
           "ingest": report, "tables": [], "inventory_tables": 0, "inventory_slices": 0, "inventory_rows": 0,
           "ledgers": ledgers, "deployments": deployments, "stages": [{"stage": "ingest", "status": "ran", "seconds": 1.0}],
           "plans": [{k: q[k] for k in ("label", "folder", "files")} for q in plans["questions"]]}
    site = publish_task.fn(str(root), str(out), ["kimi-k3"], run)
    return {"out": out, "root": root, "index": Path(site["index"]), "ingest": report, "ledgers": ledgers,
            "matrix": matrix[0], "built_matrix": matrix[1], "estimates": estimates, "plans": plans}
