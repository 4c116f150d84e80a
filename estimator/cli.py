"""`perfledger estimate ...`: operator latencies (cli_ops.py) and whole-model estimates (static, prefill-dsa)."""

from __future__ import annotations

import typer

from perfledger.estimator.cli_ops import DATA, JSON, MODE, WAREHOUSE, _priced, _source, register_ops

MODEL_CONFIG_HELP = ("HF config.json, or a folder holding one (and its hf_quant_config.json when present), used "
                     "instead of looking --model up in the model-config folders")


def register(app: typer.Typer) -> None:
    """Attach the `estimate` sub-app."""
    est_app = typer.Typer(no_args_is_help=True, help="Operator latencies (SOL/SILICON/HYBRID/EMPIRICAL) and model estimates.")
    app.add_typer(est_app, name="estimate")
    register_ops(est_app)

    @est_app.command("static")
    def static_cmd(
        model: str | None = typer.Option(None, help="HF id, e.g. Qwen/Qwen3-32B (config from the model-config folders)"),
        model_config: str | None = typer.Option(None, "--model-config", help=MODEL_CONFIG_HELP),
        system: str = typer.Option(..., help="System name"),
        backend: str = typer.Option(..., help="trtllm | sglang | vllm"),
        version: str = typer.Option(..., help="Backend version folder"),
        tp: int = typer.Option(1, help="Attention tensor parallel size"),
        moe_tp: int = typer.Option(1, help="MoE tensor parallel size"),
        moe_ep: int = typer.Option(1, help="MoE expert parallel size"),
        pp: int = typer.Option(1, help="Pipeline parallel size (every layer stays on the serial path, + pp-1 hand-offs)"),
        attention_dp: int = typer.Option(1, "--attention-dp", help="Attention data-parallel ranks (MoE models)"),
        nextn: int = typer.Option(0, help="MTP draft tokens per decode step"),
        prefix: int = typer.Option(0, help="Cached prefix tokens of each request (part of --isl)"),
        batch: int = typer.Option(..., help="Batch size"),
        isl: int = typer.Option(..., help="Input sequence length"),
        osl: int = typer.Option(..., help="Output sequence length"),
        gemm_quant: str | None = typer.Option(None, help="GEMM quant (default: the checkpoint's, else bfloat16)"),
        moe_quant: str | None = typer.Option(None, help="MoE quant (default: the checkpoint's, else bfloat16)"),
        kv_quant: str | None = typer.Option(None, help="KV-cache quant (default: the checkpoint's, else bfloat16)"),
        fmha_quant: str | None = typer.Option(None, help="Attention (FMHA) quant (default: the checkpoint's, else bfloat16)"),
        mode: str = MODE,
        breakdown: bool = typer.Option(False, "--breakdown", help="Include per-op context/generation ms"),
        data: str | None = DATA,
        warehouse: str | None = WAREHOUSE,
        as_json: bool = JSON,
    ) -> None:
        """Static whole-model estimate: {"ttft_ms", "tpot_ms", "quants", "memory"} (TTFT = prefill, TPOT = decode / (osl - 1)).

        "quants" gives each quant used and its source: flag, checkpoint or default; "memory" the per-GPU GiB
        (weights, kv, activations, runtime, total, capacity, fits, kv_budget, kv_fits; null when unsized)."""
        from perfledger.console import emit_json
        from perfledger.estimator.models.config import model_config_at
        from perfledger.estimator.models.memory import static_memory
        from perfledger.estimator.static import Deploy, static

        def compute():
            config = model_config_at(model_config, name=model) if model_config else model
            deploy = Deploy(system, backend, version, tp=tp, moe_tp=moe_tp, moe_ep=moe_ep, pp=pp, attention_dp=attention_dp,
                            nextn=nextn, gemm_quant=gemm_quant,
                            moe_quant=moe_quant, kv_quant=kv_quant, fmha_quant=fmha_quant)
            result = static(_source(data, warehouse), config, deploy, batch=batch, isl=isl, osl=osl, mode=mode.lower(),
                            prefix=prefix)
            return result, static_memory(config, system, backend, tp=tp, moe_tp=moe_tp, moe_ep=moe_ep,
                                         quants=result["quants"], batch=batch, isl=isl, osl=osl, version=version,
                                         pp=pp, dp=attention_dp, nextn=nextn, prefix=prefix)

        usage = ("give --model or --model-config" if not (model or model_config)
                 else "--batch, --isl and --osl must be >= 1" if min(batch, isl, osl) < 1
                 else "--tp, --pp, --attention-dp, --moe-tp, --moe-ep must be >= 1 and --nextn >= 0"
                 if min(tp, pp, attention_dp, moe_tp, moe_ep) < 1 or nextn < 0
                 else "--prefix must be in [0, --isl)" if not 0 <= prefix < isl else None)
        result, memory = _priced(compute, as_json, usage)
        out = result if breakdown else {k: result[k] for k in ("ttft_ms", "tpot_ms", "quants")}
        out["memory"] = memory
        if as_json:
            emit_json(out)
        else:
            used = "  ".join(f"{q}={v['quant']}({v['source']})" for q, v in out["quants"].items())
            mem = out["memory"]
            held = ""
            if mem:
                fit_note = "" if mem["fits"] else " (does not fit)"
                held = f"  memory={mem['total']:.1f}/{mem['capacity']:.1f} GiB per GPU{fit_note}"
            typer.echo(f"ttft_ms={out['ttft_ms']:.4f}  tpot_ms={out['tpot_ms']:.4f}  {used}{held}")

    @est_app.command("prefill-dsa")
    def prefill_dsa_cmd(
        model: str = typer.Option(..., help="DSA model with a lane in models/dsa_prefill.yaml, e.g. zai-org/GLM-5-FP8"),
        model_config: str | None = typer.Option(None, "--model-config", help=MODEL_CONFIG_HELP),
        isl: int = typer.Option(..., help="Input sequence length"),
        cp: int = typer.Option(..., help="Context-parallel size"),
        batch: int = typer.Option(1, help="Batch size"),
        prefix: int = typer.Option(0, help="Cached prefix (past KV) tokens"),
        system: str = typer.Option("b200_sxm", help="System name"),
        backend: str = typer.Option("sglang", help="Backend"),
        version: str = typer.Option("0.5.14", help="Backend version folder"),
        moe_tp: int | None = typer.Option(None, help="MoE TP size (default: cp / moe_ep)"),
        moe_ep: int = typer.Option(1, help="MoE EP size"),
        dense_first_k: bool = typer.Option(False, "--dense-first-k", help="Also price first_k_dense_replace layers as dense MLP"),
        data: str | None = DATA,
        warehouse: str | None = WAREHOUSE,
        as_json: bool = JSON,
    ) -> None:
        """DSA prefill under context parallelism: per-layer breakdown and prefill_ms."""
        from perfledger.console import emit_json
        from perfledger.estimator.models.config import model_config_at
        from perfledger.estimator.models.dsa_prefill import prefill_dsa

        def compute():
            config = model_config_at(model_config, name=model) if model_config else None
            return prefill_dsa(_source(data, warehouse), model, system, backend, version, isl=isl, cp=cp, batch=batch,
                               prefix=prefix, moe_tp=moe_tp, moe_ep=moe_ep, dense_first_k=dense_first_k, config=config)

        bad = "--isl, --cp, --batch must be >= 1 and --prefix >= 0" if min(isl, cp, batch) < 1 or prefix < 0 else None
        result = _priced(compute, as_json, bad)
        if as_json:
            emit_json(result)
        else:
            for name, ms in result["per_layer"].items():
                typer.echo(f"{name:<24}{ms:>12.4f} ms/layer")
            typer.echo(f"prefill_ms={result['prefill_ms']:.4f}")
