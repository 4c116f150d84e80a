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
        low_precision_input: bool = typer.Option(False, "--low-precision-input",
                                                 help="fp8_static: the input is already low precision (also minus scale_matrix)"),
        mode: str = typer.Option("silicon", help=MODE_HELP),
        data: Optional[str] = typer.Option(None, "--data", help=DATA_HELP),
        warehouse: Optional[str] = typer.Option(None, "--warehouse", help="Warehouse root"),
        queries: Optional[str] = typer.Option(None, "--queries", help="CSV of queries; one JSON line per row"),
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    ) -> None:
        """GEMM latency: {"latency_ms", "sol_ms", "source"}."""
        base = dict(system=system, backend=backend, version=version, quant=quant, m=m, n=n, k=k,
                    low_precision_input=low_precision_input)
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

    @est_app.command("static")
    def static_cmd(
        model: str = typer.Option(..., help="HF id, e.g. Qwen/Qwen3-32B (config from the wheel or ../shared)"),
        system: str = typer.Option(..., help="System name"),
        backend: str = typer.Option(..., help="trtllm | sglang | vllm"),
        version: str = typer.Option(..., help="Backend version folder"),
        tp: int = typer.Option(1, help="Attention tensor parallel size"),
        moe_tp: int = typer.Option(1, help="MoE tensor parallel size"),
        moe_ep: int = typer.Option(1, help="MoE expert parallel size"),
        batch: int = typer.Option(..., help="Batch size"),
        isl: int = typer.Option(..., help="Input sequence length"),
        osl: int = typer.Option(..., help="Output sequence length"),
        gemm_quant: str = typer.Option("bfloat16", help="GEMM quant"),
        moe_quant: str = typer.Option("bfloat16", help="MoE quant"),
        kv_quant: str = typer.Option("bfloat16", help="KV-cache quant"),
        mode: str = typer.Option("silicon", help=MODE_HELP),
        breakdown: bool = typer.Option(False, "--breakdown", help="Include per-op context/generation ms"),
        data: Optional[str] = typer.Option(None, "--data", help=DATA_HELP),
        warehouse: Optional[str] = typer.Option(None, "--warehouse", help="Warehouse root"),
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    ) -> None:
        """Static whole-model estimate: {"ttft_ms", "tpot_ms"} (TTFT = prefill, TPOT = decode / (osl - 1))."""
        from estimator.assembly import Deploy, static
        from estimator.cli import _source
        from estimator.errors import EstimatorError
        from perfledger.console import EXIT_USAGE, emit_json, fail

        if min(batch, isl, osl) < 1:
            fail("--batch, --isl and --osl must be >= 1", code=EXIT_USAGE, as_json=as_json)
        try:
            deploy = Deploy(system, backend, version, tp=tp, moe_tp=moe_tp, moe_ep=moe_ep, gemm_quant=gemm_quant,
                            moe_quant=moe_quant, kv_quant=kv_quant)
            result = static(_source(data, warehouse), model, deploy, batch=batch, isl=isl, osl=osl, mode=mode.lower())
        except (EstimatorError, ValueError, OSError) as exc:
            fail(str(exc), as_json=as_json)
        out = result if breakdown else {"ttft_ms": result["ttft_ms"], "tpot_ms": result["tpot_ms"]}
        if as_json:
            emit_json(out)
        else:
            typer.echo(f"ttft_ms={out['ttft_ms']:.4f}  tpot_ms={out['tpot_ms']:.4f}")

    @est_app.command("prefill-dsa")
    def prefill_dsa_cmd(
        model: str = typer.Option(..., help="DSA model with a lane in estimator/dsa.yaml, e.g. zai-org/GLM-5-FP8"),
        isl: int = typer.Option(..., help="Input sequence length"),
        cp: int = typer.Option(..., help="Context-parallel size"),
        batch: int = typer.Option(1, help="Batch size"),
        prefix: int = typer.Option(0, help="Cached prefix (past KV) tokens"),
        system: str = typer.Option("b200_sxm", help="System name"),
        backend: str = typer.Option("sglang", help="Backend"),
        version: str = typer.Option("0.5.14", help="Backend version folder"),
        moe_tp: Optional[int] = typer.Option(None, help="MoE TP size (default: cp / moe_ep)"),
        moe_ep: int = typer.Option(1, help="MoE EP size"),
        dense_first_k: bool = typer.Option(False, "--dense-first-k", help="Also price first_k_dense_replace layers as dense MLP"),
        data: Optional[str] = typer.Option(None, "--data", help=DATA_HELP),
        warehouse: Optional[str] = typer.Option(None, "--warehouse", help="Warehouse root"),
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    ) -> None:
        """DSA prefill under context parallelism: per-layer breakdown and prefill_ms."""
        from estimator.cli import _source
        from estimator.dsa import prefill_dsa
        from estimator.errors import EstimatorError
        from perfledger.console import EXIT_USAGE, emit_json, fail

        if min(isl, cp, batch) < 1 or prefix < 0:
            fail("--isl, --cp, --batch must be >= 1 and --prefix >= 0", code=EXIT_USAGE, as_json=as_json)
        try:
            result = prefill_dsa(_source(data, warehouse), model, system, backend, version, isl=isl, cp=cp, batch=batch,
                                 prefix=prefix, moe_tp=moe_tp, moe_ep=moe_ep, dense_first_k=dense_first_k)
        except (EstimatorError, ValueError, OSError) as exc:
            fail(str(exc), as_json=as_json)
        if as_json:
            emit_json(result)
        else:
            for name, ms in result["per_layer"].items():
                typer.echo(f"{name:<24}{ms:>12.4f} ms/layer")
            typer.echo(f"prefill_ms={result['prefill_ms']:.4f}")
