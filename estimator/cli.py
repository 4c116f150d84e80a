"""`perfledger estimate ...`: operator latencies (cli_ops.py) and whole-model estimates (static, prefill-dsa)."""

from __future__ import annotations

import typer

from perfledger.estimator.cli_ops import DATA, JSON, MODE, WAREHOUSE, _priced, _source, model_for, register_ops

MODEL_CONFIG_HELP = ("HF config.json, or a folder holding one (and its hf_quant_config.json when present), used "
                     "instead of looking --model up in the model-config folders")
MODEL_HELP = ("HF id (Qwen/Qwen3-32B), lane-spec name (kimi-k3) or a path to a config.json or a folder holding one; "
              "an unknown name lists close matches")
SYSTEM = typer.Option(..., help="System name, e.g. h200_sxm (an unknown one lists the known systems)")
BACKEND = typer.Option(..., help="trtllm | sglang | vllm")
VERSION = typer.Option(..., help="Backend version folder, e.g. 1.3.0rc20 (`perfledger tables` lists them)")


def register(app: typer.Typer) -> None:
    """Attach the `estimate` sub-app."""
    est_app = typer.Typer(no_args_is_help=True, help="Operator latencies (SOL/SILICON/HYBRID/EMPIRICAL) and model estimates.")
    app.add_typer(est_app, name="estimate")
    register_ops(est_app)
    app.command("slices")(slices_cmd)

    @est_app.command("static")
    def static_cmd(
        model: str | None = typer.Option(None, help=MODEL_HELP),
        model_config: str | None = typer.Option(None, "--model-config", help=MODEL_CONFIG_HELP),
        system: str = SYSTEM,
        backend: str = BACKEND,
        version: str = VERSION,
        tp: int = typer.Option(1, help="Attention tensor parallel size"),
        moe_tp: int = typer.Option(1, help="MoE tensor parallel size"),
        moe_ep: int = typer.Option(1, help="MoE expert parallel size"),
        pp: int = typer.Option(1, help="Pipeline parallel size (every layer stays on the serial path, + pp-1 hand-offs)"),
        attention_dp: int = typer.Option(1, "--attention-dp", help="Attention data-parallel ranks (MoE models)"),
        cp: int = typer.Option(1, "--cp", help="Context-parallel ranks: each prefills a share of every prompt, decode "
                               "runs without (SGLang, tp 1, attention-dp 1; MoE width moe_tp x moe_ep = cp)"),
        nextn: int = typer.Option(0, help="MTP draft tokens per decode step"),
        prefix: int = typer.Option(0, help="Cached prefix tokens of each request (part of --isl)"),
        image_height: int = typer.Option(0, "--image-height", help="Image height in pixels (VL models; 0: no images)"),
        image_width: int = typer.Option(0, "--image-width", help="Image width in pixels (VL models; 0: no images)"),
        num_images: int = typer.Option(1, "--num-images", help="Images per request (VL models)"),
        disable_encoder_dp: bool = typer.Option(False, "--disable-encoder-dp", help="TP-shard the vision encoder instead "
                                                "of spreading whole images over the tp ranks (the default)"),
        batch: int = typer.Option(..., help="Batch size"),
        isl: int = typer.Option(..., help="Input sequence length"),
        osl: int = typer.Option(..., help="Output sequence length"),
        gemm_quant: str | None = typer.Option(None, help="GEMM quant (default: the checkpoint's, else bfloat16)"),
        moe_quant: str | None = typer.Option(None, help="MoE quant (default: the checkpoint's, else bfloat16)"),
        kv_quant: str | None = typer.Option(None, help="KV-cache quant (default: the checkpoint's, else bfloat16)"),
        fmha_quant: str | None = typer.Option(None, help="Attention (FMHA) quant (default: the checkpoint's, else bfloat16)"),
        moe_backend: str | None = typer.Option(None, "--moe-backend", help="MoE backend where the architecture prices one "
                                               "(models.yaml moe_backends: megamoe for DeepSeek-V4 on sglang)"),
        mode: str = MODE,
        breakdown: bool = typer.Option(False, "--breakdown", help="Per-op ms: context (prefill), decode per step and "
                                       "decode total over osl-1 steps"),
        explain_miss: bool = typer.Option(False, "--explain-miss", help="When an op finds no data: say whether "
                                          "--mode hybrid answers the estimate (`perfledger slices OP` lists the data)"),
        data: str | None = DATA,
        warehouse: str | None = WAREHOUSE,
        as_json: bool = JSON,
    ) -> None:
        """Static whole-model estimate: {"ttft_ms", "tpot_ms", "encoder_ms", "quants", "energy", "memory"} (TTFT =
        vision encoder + prefill, TPOT = decode / (osl - 1)).

        A VL model given --image-height / --image-width (and --num-images) prices its vision encoder over each request's
        images (`encoder_ms`, part of TTFT; 0 without images) and its language model over isl + the images' tokens.

        "energy" (null when no op is priced from measured power): per phase ("context", "generation": "ops_wms",
        "energy_wms", "power_w" = energy / the phase's latency) and end to end ("energy_wms", "power_avg_w",
        "power_coverage" = latency share of ops with power, "power_w" = the average, null below 0.9 coverage), as
        0.12.0's static report and estimate.

        "quants" gives each quant used and its source: flag, checkpoint or default; "memory" the per-GPU GiB
        (weights, kv, activations, runtime, total, capacity, fits, kv_budget, kv_fits; null when unsized);
        --breakdown adds "breakdown": {"unit": "ms", "decode_steps", "ops": {op: {context, decode_per_step,
        decode_total}}}."""
        from perfledger.blas import without_blas_threads
        from perfledger.console import emit_json

        without_blas_threads()
        from perfledger.estimator.models.memory import static_memory
        from perfledger.estimator.models.vision import Images
        from perfledger.estimator.static import Deploy, static

        images = Images(image_height, image_width, num_images, not disable_encoder_dp)

        def priced(how: str):
            config = model_for(model, model_config)
            deploy = Deploy(system, backend, version, tp=tp, moe_tp=moe_tp, moe_ep=moe_ep, pp=pp, attention_dp=attention_dp,
                            cp=cp, nextn=nextn, gemm_quant=gemm_quant,
                            moe_quant=moe_quant, kv_quant=kv_quant, fmha_quant=fmha_quant, moe_backend=moe_backend)
            return config, static(_source(data, warehouse), config, deploy, batch=batch, isl=isl, osl=osl, mode=how,
                                  prefix=prefix, images=images)

        def compute():
            from perfledger.estimator.errors import NoDataError

            try:
                config, result = priced(mode.lower())
            except NoDataError as exc:
                if not explain_miss:
                    raise
                raise NoDataError(f"{exc}; hint: {hybrid_hint(lambda: priced('hybrid')[1], mode.lower())}") from None
            return result, static_memory(config, system, backend, tp=tp, moe_tp=moe_tp, moe_ep=moe_ep,
                                         quants=result["quants"], batch=batch, isl=isl, osl=osl, version=version,
                                         pp=pp, dp=attention_dp, nextn=nextn, prefix=prefix, images=images)

        usage = ("give --model or --model-config" if not (model or model_config)
                 else "--batch, --isl and --osl must be >= 1" if min(batch, isl, osl) < 1
                 else "--tp, --pp, --attention-dp, --cp, --moe-tp, --moe-ep must be >= 1 and --nextn >= 0"
                 if min(tp, pp, attention_dp, cp, moe_tp, moe_ep) < 1 or nextn < 0
                 else "--prefix must be in [0, --isl)" if not 0 <= prefix < isl
                 else "--image-height, --image-width and --num-images must be >= 0"
                 if min(image_height, image_width, num_images) < 0 else None)
        result, memory = _priced(compute, as_json, usage)
        out = {k: result[k] for k in ("ttft_ms", "tpot_ms", "quants", "energy")}
        out["encoder_ms"] = sum(result["encoder"].values())
        out["memory"] = memory
        if breakdown:
            out["breakdown"] = op_breakdown(result["context"], result["generation"], osl - 1, result["encoder"])
        if as_json:
            emit_json(out)
        else:
            print_static(out)

    @est_app.command("prefill-dsa")
    def prefill_dsa_cmd(
        model: str = typer.Option(..., help="DSA model with a lane in models/dsa_prefill.yaml, e.g. zai-org/GLM-5-FP8 "
                                  "(HF id, lane-spec name or config path, as for static)"),
        model_config: str | None = typer.Option(None, "--model-config", help=MODEL_CONFIG_HELP),
        isl: int = typer.Option(..., help="Input sequence length"),
        cp: int = typer.Option(..., help="Context-parallel size"),
        batch: int = typer.Option(1, help="Batch size"),
        prefix: int = typer.Option(0, help="Cached prefix (past KV) tokens"),
        system: str = SYSTEM,
        backend: str = BACKEND,
        version: str = VERSION,
        moe_tp: int | None = typer.Option(None, help="MoE TP size (default: cp / moe_ep)"),
        moe_ep: int = typer.Option(1, help="MoE EP size"),
        dense_first_k: bool = typer.Option(False, "--dense-first-k", help="Also price first_k_dense_replace layers as dense MLP"),
        data: str | None = DATA,
        warehouse: str | None = WAREHOUSE,
        as_json: bool = JSON,
    ) -> None:
        """DSA prefill under context parallelism: per-layer breakdown and prefill_ms."""
        from perfledger.console import emit_json, number, print_table
        from perfledger.estimator.models.dsa_prefill import prefill_dsa

        def compute():
            config = model_for(model, model_config)
            return prefill_dsa(_source(data, warehouse), config.name, system, backend, version, isl=isl, cp=cp,
                               batch=batch, prefix=prefix, moe_tp=moe_tp, moe_ep=moe_ep, dense_first_k=dense_first_k,
                               config=config)

        bad = "--isl, --cp, --batch must be >= 1 and --prefix >= 0" if min(isl, cp, batch) < 1 or prefix < 0 else None
        result = _priced(compute, as_json, bad)
        if as_json:
            emit_json(result)
        else:
            print_table(["part", "ms per layer"], [[name, ms] for name, ms in result["per_layer"].items()])
            typer.echo(f"prefill: {number(result['prefill_ms'], 'ms')}")


def hybrid_hint(price_hybrid, mode: str) -> str:
    """--explain-miss for a whole-model estimate: whether `--mode hybrid` (transfers from neighbour slices) prices it."""
    from perfledger.estimator.errors import EstimatorError

    if mode != "silicon":
        return f"--mode {mode} finds no neighbour either; `perfledger slices OP` lists what the data holds"
    try:
        result = price_hybrid()
    except EstimatorError:
        return "--mode hybrid finds no neighbour either; `perfledger slices OP` lists what the data holds"
    return f"--mode hybrid prices it: TTFT {result['ttft_ms']:.4g} ms, TPOT {result['tpot_ms']:.4g} ms"


def op_breakdown(context: dict[str, float], generation: dict[str, float], steps: int,
                 encoder: dict[str, float] | None = None) -> dict:
    """Per-op ms of a static estimate, named with their units: context (the prefill), decode per step (the
    mean over the osl-1 decode steps) and decode total (all steps); the vision encoder's ops (`encoder_*`, before the
    prefill) under context."""
    ops = {op: {"context": ms, "decode_per_step": None, "decode_total": None} for op, ms in (encoder or {}).items()}
    for op in [*context, *(g for g in generation if g not in context)]:
        total = generation.get(op)
        ops[op] = {"context": context.get(op), "decode_per_step": None if total is None or not steps else total / steps,
                   "decode_total": total}
    return {"unit": "ms", "decode_steps": steps, "ops": ops}


def print_static(out: dict) -> None:
    """The human form of `estimate static`: TTFT/TPOT with units, quants and memory, the breakdown as a table."""
    from perfledger.console import number, print_table

    typer.echo(f"TTFT {number(out['ttft_ms'], 'ms')}   TPOT {number(out['tpot_ms'], 'ms')}")
    if out.get("encoder_ms"):
        typer.echo(f"vision encoder: {number(out['encoder_ms'], 'ms')} of the TTFT")
    typer.echo("quants: " + ", ".join(f"{q} {v['quant']} ({v['source']})" for q, v in out["quants"].items()))
    for v in out["quants"].values():
        if "note" in v:
            typer.echo(f"note: {v['note']}")
    energy = out.get("energy")
    if energy:
        typer.echo(f"energy: prefill {number(energy['context']['energy_wms'], 'W·ms')} "
                   f"({number(energy['context']['power_w'], 'W')}), decode {number(energy['generation']['energy_wms'], 'W·ms')} "
                   f"({number(energy['generation']['power_w'], 'W')}), end to end {number(energy['power_avg_w'], 'W')} "
                   f"average over {number(100 * energy['power_coverage'], '%')} of the latency")
    mem = out["memory"]
    if mem:
        fit_note = "fits" if mem["fits"] else "does not fit"
        typer.echo(f"memory: {number(mem['total'], 'GiB')} of {number(mem['capacity'], 'GiB')} per GPU ({fit_note})")
    if "breakdown" in out:
        b = out["breakdown"]
        rows = [[op, v["context"], v["decode_per_step"], v["decode_total"]] for op, v in b["ops"].items()]
        rows.append(["total", out["ttft_ms"], out["tpot_ms"], out["tpot_ms"] * b["decode_steps"]])
        print_table(["op", "context ms", "decode ms/step", f"decode ms ({b['decode_steps']} steps)"], rows)


def slices_cmd(
    op: str = typer.Argument(..., help="Op: gemm, moe, comm, context_attention, generation_attention, context_mla, "
                                       "generation_mla (estimator/slices.yaml)"),
    system: str = typer.Option(..., help="System name, e.g. h200_sxm (an unknown one lists the known systems)"),
    backend: str | None = typer.Option(None, help="trtllm | sglang | vllm (required except for comm)"),
    version: str | None = typer.Option(None, help="Backend version folder (required except for comm)"),
    where: list[str] = typer.Option([], "--where", help="Keep slices with OPTION=VALUE, e.g. quant=fp8 or ep=8; repeatable"),
    data: str | None = DATA,
    warehouse: str | None = WAREHOUSE,
    as_json: bool = JSON,
) -> None:
    """The slices an op's data holds here (exact-match columns) and each one's grid ranges (min..max, points):
    what `estimate OP` can answer without a transfer."""
    from perfledger.console import EXIT_USAGE, emit_json, fail, print_table
    from perfledger.estimator.errors import EstimatorError
    from perfledger.estimator.slices import op_slices, slice_specs

    if op not in slice_specs():
        fail(f"unknown op {op!r}; expected one of {', '.join(slice_specs())}", code=EXIT_USAGE, as_json=as_json)
    bad = [w for w in where if "=" not in w or w.split("=", 1)[0] not in slice_specs()[op]["slice"]]
    if bad:
        fail(f"--where {bad[0]!r}: expected OPTION=VALUE with OPTION one of {', '.join(slice_specs()[op]['slice'])}",
             code=EXIT_USAGE, as_json=as_json)
    if not slice_specs()[op].get("nccl") and not (backend and version):
        fail(f"{op} slices are per backend version: give --backend and --version", code=EXIT_USAGE, as_json=as_json)
    try:
        frame = op_slices(_source(data, warehouse), op, system, backend, version, dict(w.split("=", 1) for w in where))
    except (EstimatorError, OSError) as exc:
        fail(str(exc), as_json=as_json)
    if as_json:
        emit_json({"op": op, "system": system, "backend": backend, "version": version, "slices": frame.to_dicts()})
        return
    if not frame.height:
        fail(f"no {op} slices match {' '.join(where)}", as_json=as_json)
    axes = [c[: -len("_min")] for c in frame.columns if c.endswith("_min")]
    tail = [c for c in ("rows", "from") if c in frame.columns]
    fixed = [c for c in frame.columns if c not in tail and not c.startswith(tuple(f"{a}_" for a in axes))]
    rows = [[*(r[c] for c in fixed), *(r[c] for c in tail),
             *(f"{r[f'{a}_min']:,}..{r[f'{a}_max']:,} ({r[f'{a}_points']})" for a in axes)]
            for r in frame.iter_rows(named=True)]
    print_table([*fixed, *tail, *(f"{a} range (points)" for a in axes)], rows,
                title=f"{frame.height} {op} slices on {system} {backend or ''} {version or ''}".rstrip())
