"""Per-op `estimate` commands (gemm, moe, comm); each only maps options to a query row."""

from __future__ import annotations

import inspect
from typing import Optional

import typer

from perfledger.estimator.cli import DATA_HELP, MODE_HELP, run_queries

# Options every per-op command shares (one OptionInfo serves every command that names it).
SYSTEM = typer.Option(None, help="System name, e.g. h200_sxm")
BACKEND = typer.Option(None, help="trtllm | sglang | vllm")
VERSION = typer.Option(None, help="Backend version folder")
MODE = typer.Option("silicon", help=MODE_HELP)
DATA = typer.Option(None, "--data", help=DATA_HELP)
WAREHOUSE = typer.Option(None, "--warehouse", help="Warehouse root")
QUERIES = typer.Option(None, "--queries", help="CSV of queries; one JSON line per row")
JSON = typer.Option(False, "--json", help="Print JSON")


def _priced(compute, as_json: bool, bad_usage: str | None) -> dict:
    """Run a whole-model pricing call; usage problems exit 2, estimator/data errors exit 1 (named)."""
    from perfledger.estimator.errors import EstimatorError
    from perfledger.console import EXIT_USAGE, fail

    if bad_usage:
        fail(bad_usage, code=EXIT_USAGE, as_json=as_json)
    try:
        return compute()
    except (EstimatorError, ValueError, OSError) as exc:
        fail(str(exc), as_json=as_json)


_STR, _INT = Optional[str], Optional[int]

# Per-op query options, in query-column order: (name, type, option). The shared tail (mode, data,
# warehouse, queries, json) is added by _op_command.
OP_OPTIONS = {
    "gemm": ('GEMM latency: {"latency_ms", "sol_ms", "source"}.', [
        ("system", _STR, SYSTEM), ("backend", _STR, BACKEND), ("version", _STR, VERSION),
        ("quant", _STR, typer.Option(None, help="GEMM quant, e.g. bfloat16, fp8")),
        ("m", _INT, typer.Option(None, help="Tokens (rows of A)")),
        ("n", _INT, typer.Option(None, help="Output features")),
        ("k", _INT, typer.Option(None, help="Input features")),
        ("low_precision_input", bool, typer.Option(False, "--low-precision-input",
                                                   help="fp8_static: the input is already low precision (also minus scale_matrix)")),
    ]),
    "moe": ('MoE block latency: {"latency_ms", "sol_ms", "source"}.', [
        ("system", _STR, SYSTEM), ("backend", _STR, BACKEND), ("version", _STR, VERSION),
        ("quant", _STR, typer.Option(None, help="MoE quant, e.g. bfloat16, fp8, nvfp4")),
        ("distribution", str, typer.Option("power_law_1.2", help="Token-to-expert workload distribution")),
        ("gated", bool, typer.Option(True, "--gated/--non-gated", help="SwiGLU (gated) or plain FFN experts")),
        ("topk", _INT, typer.Option(None, help="Experts per token")),
        ("experts", _INT, typer.Option(None, help="Number of experts")),
        ("hidden", _INT, typer.Option(None, help="Hidden size")),
        ("inter", _INT, typer.Option(None, help="Expert intermediate size")),
        ("tp", int, typer.Option(1, help="MoE tensor-parallel size")),
        ("ep", int, typer.Option(1, help="MoE expert-parallel size")),
        ("tokens", _INT, typer.Option(None, help="Tokens entering the MoE block")),
    ]),
    "comm": ('NCCL collective latency: {"latency_ms", "sol_ms", "source"}.', [
        ("system", _STR, typer.Option(None, help="System name (its spec picks the NCCL version)")),
        ("op", _STR, typer.Option(None, help="all_gather | reduce_scatter | all_reduce | alltoall")),
        ("quant", str, typer.Option("half", help="half | int8")),
        ("num_gpus", _INT, typer.Option(None, help="GPUs in the collective")),
        ("elements", _INT, typer.Option(None, help="Message size in elements")),
    ]),
}
_TAIL = [("mode", str, MODE), ("data", _STR, DATA), ("warehouse", _STR, WAREHOUSE), ("queries", _STR, QUERIES),
         ("as_json", bool, JSON)]


def _op_command(est_app: typer.Typer, op: str) -> None:
    """One per-op command: its options become one query row (or fill absent CSV columns)."""
    doc, options = OP_OPTIONS[op]

    def command(**kw) -> None:
        tail = {name: kw.pop(name) for name, _, _ in _TAIL}
        run_queries(op, kw, tail["data"], tail["warehouse"], tail["mode"], tail["as_json"], tail["queries"])

    command.__signature__ = inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=kind)
         for name, kind, opt in [*options, *_TAIL]])
    command.__doc__ = doc
    command.__name__ = op
    est_app.command(op)(command)


def register_ops(est_app: typer.Typer) -> None:
    for op in OP_OPTIONS:
        _op_command(est_app, op)

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
        gemm_quant: Optional[str] = typer.Option(None, help="GEMM quant (default: the checkpoint's, else bfloat16)"),
        moe_quant: Optional[str] = typer.Option(None, help="MoE quant (default: the checkpoint's, else bfloat16)"),
        kv_quant: Optional[str] = typer.Option(None, help="KV-cache quant (default: the checkpoint's, else bfloat16)"),
        fmha_quant: Optional[str] = typer.Option(None, help="Attention (FMHA) quant (default: the checkpoint's, else bfloat16)"),
        mode: str = MODE,
        breakdown: bool = typer.Option(False, "--breakdown", help="Include per-op context/generation ms"),
        data: Optional[str] = DATA,
        warehouse: Optional[str] = WAREHOUSE,
        as_json: bool = JSON,
    ) -> None:
        """Static whole-model estimate: {"ttft_ms", "tpot_ms", "quants", "memory"} (TTFT = prefill, TPOT = decode / (osl - 1)).

        "quants" gives each quant used and its source: flag, checkpoint or default; "memory" the per-GPU GiB
        (weights, kv, activations, runtime, total, capacity, fits, kv_budget, kv_fits; null when unsized)."""
        from perfledger.estimator.assembly import Deploy, static
        from perfledger.estimator.cli import _source
        from perfledger.estimator.memory import static_memory
        from perfledger.console import emit_json

        def compute():
            deploy = Deploy(system, backend, version, tp=tp, moe_tp=moe_tp, moe_ep=moe_ep, gemm_quant=gemm_quant,
                            moe_quant=moe_quant, kv_quant=kv_quant, fmha_quant=fmha_quant)
            return static(_source(data, warehouse), model, deploy, batch=batch, isl=isl, osl=osl, mode=mode.lower())

        result = _priced(compute, as_json, "--batch, --isl and --osl must be >= 1" if min(batch, isl, osl) < 1 else None)
        out = result if breakdown else {k: result[k] for k in ("ttft_ms", "tpot_ms", "quants")}
        out["memory"] = static_memory(model, system, backend, tp=tp, moe_tp=moe_tp, moe_ep=moe_ep, quants=result["quants"],
                                      batch=batch, isl=isl, osl=osl, version=version)
        if as_json:
            emit_json(out)
        else:
            used = "  ".join(f"{q}={v['quant']}({v['source']})" for q, v in out["quants"].items())
            mem = out["memory"]
            held = f"  memory={mem['total']:.1f}/{mem['capacity']:.1f} GiB per GPU" + ("" if mem["fits"] else " (does not fit)") if mem else ""
            typer.echo(f"ttft_ms={out['ttft_ms']:.4f}  tpot_ms={out['tpot_ms']:.4f}  {used}{held}")

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
        data: Optional[str] = DATA,
        warehouse: Optional[str] = WAREHOUSE,
        as_json: bool = JSON,
    ) -> None:
        """DSA prefill under context parallelism: per-layer breakdown and prefill_ms."""
        from perfledger.estimator.cli import _source
        from perfledger.estimator.dsa import prefill_dsa
        from perfledger.console import emit_json

        bad = "--isl, --cp, --batch must be >= 1 and --prefix >= 0" if min(isl, cp, batch) < 1 or prefix < 0 else None
        result = _priced(lambda: prefill_dsa(_source(data, warehouse), model, system, backend, version, isl=isl, cp=cp,
                                             batch=batch, prefix=prefix, moe_tp=moe_tp, moe_ep=moe_ep,
                                             dense_first_k=dense_first_k), as_json, bad)
        if as_json:
            emit_json(result)
        else:
            for name, ms in result["per_layer"].items():
                typer.echo(f"{name:<24}{ms:>12.4f} ms/layer")
            typer.echo(f"prefill_ms={result['prefill_ms']:.4f}")
