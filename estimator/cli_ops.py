"""Per-op `estimate` commands (gemm, moe, comm); each only maps options to a query row."""

from __future__ import annotations

from typing import Optional

import typer

from estimator.cli import DATA_HELP, MODE_HELP, run_queries


def register_ops(est_app: typer.Typer) -> None:
    @est_app.command("gemm")
    def gemm(
        system: Optional[str] = typer.Option(None, help="System name, e.g. h200_sxm"),
        backend: Optional[str] = typer.Option(None, help="trtllm | sglang | vllm"),
        version: Optional[str] = typer.Option(None, help="Backend version folder"),
        quant: Optional[str] = typer.Option(None, help="GEMM quant, e.g. bfloat16, fp8"),
        m: Optional[int] = typer.Option(None, help="Tokens (rows of A)"),
        n: Optional[int] = typer.Option(None, help="Output features"),
        k: Optional[int] = typer.Option(None, help="Input features"),
        mode: str = typer.Option("silicon", help=MODE_HELP),
        data: Optional[str] = typer.Option(None, "--data", help=DATA_HELP),
        warehouse: Optional[str] = typer.Option(None, "--warehouse", help="Warehouse root"),
        queries: Optional[str] = typer.Option(None, "--queries", help="CSV of queries; one JSON line per row"),
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    ) -> None:
        """GEMM latency: {"latency_ms", "sol_ms", "source"}."""
        base = dict(system=system, backend=backend, version=version, quant=quant, m=m, n=n, k=k)
        run_queries("gemm", base, data, warehouse, mode, as_json, queries)

    @est_app.command("moe")
    def moe(
        system: Optional[str] = typer.Option(None, help="System name"),
        backend: Optional[str] = typer.Option(None, help="trtllm | sglang | vllm"),
        version: Optional[str] = typer.Option(None, help="Backend version folder"),
        quant: Optional[str] = typer.Option(None, help="MoE quant, e.g. bfloat16, fp8, nvfp4"),
        hidden: Optional[int] = typer.Option(None, help="Hidden size"),
        inter: Optional[int] = typer.Option(None, help="Expert intermediate size"),
        topk: Optional[int] = typer.Option(None, help="Experts per token"),
        experts: Optional[int] = typer.Option(None, help="Number of experts"),
        tp: int = typer.Option(1, help="MoE tensor-parallel size"),
        ep: int = typer.Option(1, help="MoE expert-parallel size"),
        distribution: str = typer.Option("power_law_1.2", help="Token-to-expert workload distribution"),
        gated: bool = typer.Option(True, "--gated/--non-gated", help="SwiGLU (gated) or plain FFN experts"),
        tokens: Optional[int] = typer.Option(None, help="Tokens entering the MoE block"),
        mode: str = typer.Option("silicon", help=MODE_HELP),
        data: Optional[str] = typer.Option(None, "--data", help=DATA_HELP),
        warehouse: Optional[str] = typer.Option(None, "--warehouse", help="Warehouse root"),
        queries: Optional[str] = typer.Option(None, "--queries", help="CSV of queries; one JSON line per row"),
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    ) -> None:
        """MoE block latency: {"latency_ms", "sol_ms", "source"}."""
        base = dict(system=system, backend=backend, version=version, quant=quant, distribution=distribution, gated=gated,
                    topk=topk, experts=experts, hidden=hidden, inter=inter, tp=tp, ep=ep, tokens=tokens)
        run_queries("moe", base, data, warehouse, mode, as_json, queries)

    @est_app.command("comm")
    def comm(
        system: Optional[str] = typer.Option(None, help="System name (its spec picks the NCCL version)"),
        op: Optional[str] = typer.Option(None, help="all_gather | reduce_scatter | all_reduce | alltoall"),
        num_gpus: Optional[int] = typer.Option(None, help="GPUs in the collective"),
        elements: Optional[int] = typer.Option(None, help="Message size in elements"),
        quant: str = typer.Option("half", help="half | int8"),
        mode: str = typer.Option("silicon", help=MODE_HELP),
        data: Optional[str] = typer.Option(None, "--data", help=DATA_HELP),
        warehouse: Optional[str] = typer.Option(None, "--warehouse", help="Warehouse root"),
        queries: Optional[str] = typer.Option(None, "--queries", help="CSV of queries; one JSON line per row"),
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    ) -> None:
        """NCCL collective latency: {"latency_ms", "sol_ms", "source"}."""
        base = dict(system=system, op=op, quant=quant, num_gpus=num_gpus, elements=elements)
        run_queries("comm", base, data, warehouse, mode, as_json, queries)
