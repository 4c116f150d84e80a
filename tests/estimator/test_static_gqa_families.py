"""Static estimates of the GQA families outside the MLA line (Mixtral, gpt-oss, Llama-4, MiniMax-M2, Qwen3-VL, Gemma-4,
DeciLM, MiMo, Step-3.7-Flash) against aiconfigurator-core 0.12.0, op by op, and the plans' layer splits.

Deployments pinned from benchmarks/static_parity.py (`--only` these families, seed 1): every op of both phases, TTFT
and TPOT within 1e-6 of 0.12.0's static engine with the checkpoint's default quants; EMPIRICAL and SOL at one point
per plan; the refusals both sides make."""

from __future__ import annotations

import json

import pytest

from perfledger.estimator.errors import EstimatorError, UnsupportedModelError
from perfledger.estimator.models.config import model_config, model_config_at
from perfledger.estimator.models.plans.registry import load_model
from perfledger.estimator.static import Deploy, static
from tests.estimator.conftest import sweep_deployment


def _d(model, system, backend, version, tp, moe_tp, moe_ep, batch, isl, osl, mode):
    return sweep_deployment(model, "-", system, backend, version, tp, moe_tp, moe_ep, batch, isl, osl, mode)


# drawn by the sweep (seed 1), answered on both sides: every new family, checkpoints, splits, systems, modes
AGREE = [
    _d("mistralai/Mixtral-8x22B-v0.1", "b300_sxm", "sglang", "0.5.14", 4, 4, 1, 3, 1270, 29, "HYBRID"),
    _d("mistralai/Mixtral-8x7B-v0.1", "b300_sxm", "trtllm", "1.3.0rc23", 2, 2, 1, 1, 1878, 122, "HYBRID"),
    _d("mistralai/Mixtral-8x22B-v0.1", "gb200", "vllm", "0.24.0", 1, 1, 1, 42, 1070, 109, "HYBRID"),
    _d("openai/gpt-oss-20b", "gb300", "sglang", "0.5.14", 1, 1, 1, 2, 109, 32, "SILICON"),
    _d("openai/gpt-oss-20b", "gb200", "trtllm", "1.3.0rc20", 2, 1, 2, 8, 900, 117, "HYBRID"),
    _d("openai/gpt-oss-20b", "b60", "vllm", "0.20.0", 2, 1, 2, 2, 468, 145, "SILICON"),
    # were 'differs' (context MoE 18 % / 30 %): the mxfp4 MoE borrowed bf16 where 0.12.0 borrows fp8 (see below)
    _d("openai/gpt-oss-120b", "l40s", "trtllm", "1.3.0rc20", 4, 2, 2, 7, 73, 199, "HYBRID"),
    _d("openai/gpt-oss-20b", "l40s", "trtllm", "1.3.0rc20", 8, 2, 4, 8, 4573, 101, "HYBRID"),
    _d("nvidia/MiniMax-M2.5-NVFP4", "b300_sxm", "sglang", "0.5.14", 8, 4, 2, 17, 154, 54, "HYBRID"),
    _d("nvidia/MiniMax-M2.7-NVFP4", "b200_sxm", "trtllm", "1.3.0rc23", 8, 2, 4, 6, 95, 34, "HYBRID"),
    _d("nvidia/MiniMax-M2.5-NVFP4", "b200_sxm", "vllm", "0.24.0", 4, 4, 1, 5, 522, 77, "SILICON"),
    _d("Qwen/Qwen3-VL-8B-Instruct", "a100_sxm", "sglang", "0.5.10", 2, 1, 1, 9, 1566, 17, "SILICON"),
    _d("Qwen/Qwen3-VL-2B-Instruct", "gb300", "trtllm", "1.3.0rc20", 2, 1, 1, 41, 140, 18, "HYBRID"),
    _d("Qwen/Qwen3-VL-30B-A3B-Instruct", "h100_sxm", "vllm", "0.24.0", 1, 1, 1, 7, 7593, 69, "SILICON"),
    _d("Qwen/Qwen3-VL-235B-A22B-Instruct", "b300_sxm", "trtllm", "1.3.0rc23", 2, 2, 1, 2, 151, 52, "HYBRID"),
    _d("XiaomiMiMo/MiMo-7B-Base", "h100_sxm", "sglang", "0.5.14", 2, 1, 1, 1, 255, 115, "SILICON"),
    _d("XiaomiMiMo/MiMo-7B-Base", "h200_sxm", "vllm", "0.24.0", 1, 1, 1, 2, 286, 218, "HYBRID"),
    _d("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "h100_sxm", "sglang", "0.5.16", 2, 2, 1, 27, 227, 32, "HYBRID"),
    _d("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "l40s", "trtllm", "1.3.0rc20", 1, 1, 1, 7, 79, 2, "SILICON"),
    _d("meta-llama/Llama-4-Scout-17B-16E-Instruct", "b200_sxm", "vllm", "0.24.0", 8, 8, 1, 58, 240, 8, "SILICON"),
    _d("stepfun-ai/Step-3.7-Flash-FP8", "rtx_pro_6000_server", "sglang", "0.5.14", 1, 1, 1, 63, 83, 4, "HYBRID"),
    _d("stepfun-ai/Step-3.7-Flash-FP8", "h200_sxm", "vllm", "0.24.0", 2, 2, 1, 20, 4370, 168, "HYBRID"),
    _d("stepfun-ai/Step-3.7-Flash", "b300_sxm", "sglang", "0.5.14", 2, 1, 2, 16, 1297, 120, "HYBRID"),
    _d("google/gemma-4-26B-A4B", "b200_sxm", "sglang", "0.5.14", 8, 4, 2, 18, 1150, 32, "HYBRID"),
    _d("nvidia/Gemma-4-26B-A4B-NVFP4", "gb300", "trtllm", "1.3.0rc20", 8, 4, 2, 9, 110, 126, "HYBRID"),
    _d("google/gemma-4-26B-A4B", "gb200", "vllm", "0.24.0", 2, 2, 1, 1, 11185, 91, "HYBRID"),
    _d("nvidia/Gemma-4-31B-IT-NVFP4", "b200_sxm", "trtllm", "1.3.0rc20", 2, 2, 1, 4, 700, 10, "HYBRID"),  # dense
    _d("nvidia/Gemma-4-31B-IT-NVFP4", "b200_sxm", "sglang", "0.5.14", 2, 2, 1, 4, 700, 10, "SILICON"),
    _d("nvidia/Llama-3_3-Nemotron-Super-49B-v1", "b60", "vllm", "0.26.0", 1, 1, 1, 2, 2549, 17, "HYBRID"),
    _d("nvidia/Llama-3_3-Nemotron-Super-49B-v1", "gb300", "trtllm", "1.3.0rc20", 2, 2, 1, 6, 477, 21, "SILICON"),
]

# one point per plan in the modes the sweep does not draw
OTHER_MODES = [
    _d("mistralai/Mixtral-8x7B-v0.1", "h200_sxm", "trtllm", "1.3.0rc20", 2, 1, 2, 4, 700, 10, mode)
    for mode in ("EMPIRICAL", "SOL")
] + [
    _d("openai/gpt-oss-20b", "h200_sxm", "sglang", "0.5.14", 2, 1, 2, 4, 700, 10, "EMPIRICAL"),
    _d("openai/gpt-oss-20b", "h200_sxm", "trtllm", "1.3.0rc20", 2, 1, 2, 4, 700, 10, "SOL"),
    _d("meta-llama/Llama-4-Scout-17B-16E-Instruct", "b200_sxm", "trtllm", "1.3.0rc20", 4, 1, 4, 4, 700, 10, "EMPIRICAL"),
    _d("meta-llama/Llama-4-Scout-17B-16E-Instruct", "b200_sxm", "trtllm", "1.3.0rc20", 4, 1, 4, 4, 700, 10, "SOL"),
    _d("nvidia/Llama-3_3-Nemotron-Super-49B-v1", "h200_sxm", "vllm", "0.24.0", 2, 1, 1, 4, 700, 10, "EMPIRICAL"),
    _d("nvidia/Llama-3_3-Nemotron-Super-49B-v1", "h200_sxm", "vllm", "0.24.0", 2, 1, 1, 4, 700, 10, "SOL"),
    _d("google/gemma-4-26B-A4B", "h200_sxm", "trtllm", "1.3.0rc20", 2, 1, 2, 4, 700, 10, "EMPIRICAL"),
    _d("google/gemma-4-26B-A4B", "h200_sxm", "trtllm", "1.3.0rc20", 2, 1, 2, 4, 700, 10, "SOL"),
    _d("Qwen/Qwen3-VL-8B-Instruct", "h100_sxm", "trtllm", "1.3.0rc20", 1, 1, 1, 4, 700, 10, "EMPIRICAL"),
    _d("Qwen/Qwen3-8B", "h200_sxm", "trtllm", "1.3.0rc20", 2, 1, 1, 4, 700, 10, "SOL"),  # the SOL memory ops
]


def _id(d):
    return f"{d['model'].split('/')[1]}-{d['system']}-{d['backend']}-tp{d['tp']}ep{d['moe_ep']}-{d['mode']}"


@pytest.mark.aic
@pytest.mark.parametrize("d", AGREE + OTHER_MODES, ids=_id)
def test_deployment_matches_reference_per_op(wheel_est, sweep, d):
    """No op, and neither TTFT nor TPOT, past 1e-6 relative; both sides answer."""
    row = sweep.run_one(wheel_est, d)
    assert row["outcome"] == "agree", row


@pytest.mark.aic
def test_dense_gemma4_with_expert_parallelism_is_refused_like_the_reference(wheel_est, sweep):
    """Gemma-4-31B has no routed experts: 0.12.0 asserts moe_ep 1, we refuse naming the config."""
    d = _d("nvidia/Gemma-4-31B-IT-NVFP4", "b200_sxm", "trtllm", "1.3.0rc20", 2, 1, 2, 4, 700, 10, "SILICON")
    with pytest.raises(UnsupportedModelError, match=r"Gemma-4-31B-IT-NVFP4_config.json: a dense Gemma-4 .* moe_ep 1, not 2"):
        static(wheel_est, d["model"], Deploy("b200_sxm", "trtllm", "1.3.0rc20", tp=2, moe_ep=2), batch=4, isl=700, osl=10)
    row = sweep.run_one(wheel_est, d)
    assert row["outcome"] == "both miss" and "moe_ep_size=1" in row["theirs"], row


@pytest.mark.aic
def test_fp8_block_minimax_m2_split_across_a_weight_block_is_refused_like_the_reference(wheel_est, sweep):
    """MiniMax-M2.5 (fp8, 128-wide blocks): 1536 / moe_tp 8 = 192 columns per GPU splits a block; both refuse."""
    d = _d("MiniMaxAI/MiniMax-M2.5", "h200_sxm", "trtllm", "1.3.0rc20", 8, 8, 1, 4, 700, 10, "SILICON")
    with pytest.raises(UnsupportedModelError, match=r"moe_intermediate_size 1536 / moe_tp 8 = 192 is not a multiple"):
        static(wheel_est, d["model"], Deploy("h200_sxm", "trtllm", "1.3.0rc20", tp=8, moe_tp=8), batch=4, isl=700, osl=10)
    assert sweep.run_one(wheel_est, d)["outcome"] == "both miss"


def _layer_types(name):
    m = load_model(name)
    own = m.plan_dims
    return {(g, e): sum(a == g and b == e for a, b in zip(own.global_attention, own.moe, strict=True))
            for g in (True, False) for e in (True, False)}


@pytest.mark.aic
def test_llama4_layer_split_follows_the_interleave_step():
    """Even layers chunked (banded), odd global; Scout (step 1) MoE everywhere, Maverick (step 2) on odd layers."""
    scout = _layer_types("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert scout == {(True, True): 24, (True, False): 0, (False, True): 24, (False, False): 0}
    maverick = _layer_types("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    assert maverick == {(True, True): 24, (True, False): 0, (False, True): 0, (False, False): 24}
    m = load_model("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    assert (m.plan_dims.window, m.plan_dims.dense_inter, m.dims.moe_inter) == (8192, 16384, 8192)


@pytest.mark.aic
def test_step37_layer_types_trimmed_to_the_decoder_and_dense_first_layers():
    """Step-3.7-Flash: layer_types counted over the 45 decoder layers; the first 3 dense, one shared expert elsewhere."""
    cfg = model_config("stepfun-ai/Step-3.7-Flash").text
    own = load_model("stepfun-ai/Step-3.7-Flash").plan_dims
    assert sum(own.global_attention) == cfg["layer_types"][:45].count("full_attention")
    assert own.moe == (False,) * 3 + (True,) * 42
    assert (own.window, own.shared_inter) == (512, 1280)


@pytest.mark.aic
def test_decilm_block_runs_cover_every_layer():
    """Nemotron-Super-49B: the runs add up to the 80 blocks; attention-free runs have kv_heads 0; widths round to 256."""
    cfg = model_config("nvidia/Llama-3_3-Nemotron-Super-49B-v1").config
    groups = load_model("nvidia/Llama-3_3-Nemotron-Super-49B-v1").plan_dims.groups
    assert sum(g.count for g in groups) == 80
    assert sum(g.count for g in groups if not g.kv_heads) == sum(b["attention"]["no_op"] for b in cfg["block_configs"])
    assert all(g.inter % 256 == 0 for g in groups)
    first = cfg["block_configs"][0]
    assert (groups[0].kv_heads, groups[0].inter) == (64 // first["attention"]["n_heads_in_group"], 14336)


def _write(tmp_path, cfg):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return model_config_at(path)


@pytest.mark.aic
def test_decilm_without_block_configs_is_an_error_naming_the_file(tmp_path):
    cfg = dict(model_config("nvidia/Llama-3_3-Nemotron-Super-49B-v1").config)
    del cfg["block_configs"]
    with pytest.raises(EstimatorError, match=r"config.json: DeciLM config without block_configs"):
        load_model(_write(tmp_path, cfg))


@pytest.mark.aic
def test_gemma4_layer_types_of_the_wrong_length_is_an_error_naming_the_file(tmp_path):
    cfg = json.loads(json.dumps(model_config("google/gemma-4-26B-A4B").config))
    cfg["text_config"]["layer_types"] = cfg["text_config"]["layer_types"][:-1]
    with pytest.raises(EstimatorError, match=r"config.json: layer_types must name .* once per layer \(30\)"):
        load_model(_write(tmp_path, cfg))


@pytest.mark.aic
@pytest.mark.parametrize("system,version", [("l40s", "1.3.0rc20"), ("h100_sxm", "1.3.0rc23"), ("h200_sxm", "1.3.0rc23")])
@pytest.mark.parametrize("mode", ["HYBRID", "EMPIRICAL"])
def test_mxfp4_moe_borrows_the_quant_the_table_names_first(wheel_est, oracle, system, version, mode):
    """Sweep find (gpt-oss-120b l40s trtllm, context MoE 18 % off): w4a16_mxfp4 (0.5, 1) is as far from bf16 (2, 1)
    as from fp8 (1, 2); 0.12.0 takes the quant the table's rows name first over both kernel families (l40s: fp8,
    from its non-gated rows; h100/h200: bf16), not the first of the query's own gating."""
    import polars as pl

    from perfledger.estimator.batch import estimate

    borrowed = 0
    for tp, ep in ((2, 2), (1, 4), (4, 1)):
        key = dict(system=system, backend="trtllm", version=version, quant="w4a16_mxfp4", distribution="power_law_1.2",
                   gated=True, topk=4, experts=128, hidden=2880, inter=2880, tp=tp, ep=ep)
        for tokens in (7, 512, 2048):
            ref, label = oracle.moe(**key, tokens=tokens, mode=mode)
            row = estimate(wheel_est, "moe", pl.DataFrame({k: [v] for k, v in {**key, "tokens": tokens}.items()}),
                           mode=mode.lower()).row(0, named=True)
            assert row["latency_ms"] == pytest.approx(ref, rel=1e-9), (key, tokens)
            # no provenance: nothing beyond silicon fired (HYBRID reads h100/h200's lent mxfp4 rows at some splits)
            assert row["source"] == (label or "silicon"), (key, tokens)
            borrowed += row["source"] == "xprofile"
    assert borrowed >= 3


@pytest.mark.aic
@pytest.mark.parametrize("model,needs", [("nvidia/Nemotron-H-56B-Base-8K", "Mamba-2 kernels"),
                                         ("MiniMaxAI/MiniMax-M3", "MiniMax sparse attention")])
def test_architectures_priced_by_the_reference_but_not_here_are_typed_refusals(model, needs):
    """0.12.0 prices them; until their op families are here the answer is a typed refusal naming what is missing,
    never an estimate and never a plain 'not in models.yaml'."""
    with pytest.raises(UnsupportedModelError, match=f"need op families not priced yet: .*{needs}"):
        load_model(model)


MEMORY = [("XiaomiMiMo/MiMo-7B-Base", "h200_sxm", "trtllm", "1.3.0rc20", 2, 1, 1),
          ("Qwen/Qwen3-VL-8B-Instruct", "h200_sxm", "vllm", "0.24.0", 2, 1, 1),
          ("Qwen/Qwen3-VL-32B-Instruct", "h100_sxm", "sglang", "0.5.14", 4, 1, 1),
          ("Qwen/Qwen3-VL-30B-A3B-Instruct", "h200_sxm", "sglang", "0.5.14", 4, 1, 4),
          ("Qwen/Qwen3-VL-235B-A22B-Instruct", "b200_sxm", "trtllm", "1.3.0rc20", 8, 1, 8),
          ("MiniMaxAI/MiniMax-M2.5", "h200_sxm", "trtllm", "1.3.0rc20", 4, 1, 4),
          ("nvidia/MiniMax-M2.5-NVFP4", "b200_sxm", "vllm", "0.24.0", 4, 2, 2)]


@pytest.mark.aic
@pytest.mark.parametrize("tokens", [256, 8192])
@pytest.mark.parametrize("model,system,backend,version,tp,moe_tp,moe_ep", MEMORY)
def test_memory_of_the_gqa_families_equals_the_reference(model, system, backend, version, tp, moe_tp, moe_ep, tokens,
                                                         aic_core):
    """memory.yaml's entries for MiMo, Qwen3-VL(-MoE) and MiniMax-M2 (Mixtral shares MiniMax-M2's; 0.12.0 reads it
    only from a local folder): weights, KV per token, activations, runtime and capacity equal 0.12.0's breakdown
    (the VL families' activation coefficients are its `default` row; the vision encoder holds no weights there)."""
    from tests.estimator.test_memory import test_per_gpu_memory_equals_the_reference as memory_parity

    memory_parity(model, system, backend, version, tp, moe_tp, moe_ep, tokens, aic_core)


@pytest.mark.aic
@pytest.mark.parametrize("system", ["gb200", "b300_sxm"])
def test_empirical_gemm_on_a_version_without_own_rows_misses_as_the_reference_op_does(wheel_est, oracle, system):
    """Sweep find (`--modes EMPIRICAL`: Llama-4 / Qwen3-VL on trtllm 1.3.0rc23 'only we miss'): that version holds
    no GEMM rows of its own, only a reuse.yaml. 0.12.0's op-level EMPIRICAL misses there as ours does; its static
    engine answers, the sweep setting EMPIRICAL in a spec over the database `_maybe_load_database` loaded (the
    SILICON view, donor rows included). Kept: EMPIRICAL reads the own version (see Known gaps)."""
    import polars as pl

    from perfledger.estimator.batch import estimate
    from perfledger.estimator.errors import NoDataError

    for m, n, k in ((7, 4096, 5120), (512, 1280, 4096), (2000, 8192, 5120)):
        assert oracle.gemm(system, "trtllm", "1.3.0rc23", "bfloat16", m, n, k, mode="EMPIRICAL") == (None, None)
        frame = pl.DataFrame({"system": [system], "backend": ["trtllm"], "version": ["1.3.0rc23"], "quant": ["bfloat16"],
                              "m": [m], "n": [n], "k": [k]})
        with pytest.raises(NoDataError, match="no gemm_perf rows"):
            estimate(wheel_est, "gemm", frame, mode="empirical")
        assert estimate(wheel_est, "gemm", frame, mode="hybrid").item(0, "latency_ms") > 0  # the shared layer answers


@pytest.mark.aic
def test_empirical_gemm_reads_the_own_version_like_the_reference_op(wheel_est, oracle):
    """Sweep find (`--modes EMPIRICAL`: Step-3.7-Flash / Qwen3-VL on b60 vllm 0.26.0, router / o / down GEMMs 0.01–11 %
    off the static engine): 0.12.0's op-level EMPIRICAL over 0.26.0's own rows equals ours at those shapes (its static
    engine presumably reads the SILICON-loaded database, 0.20.0's rows too; not checked)."""
    import polars as pl

    from perfledger.estimator.batch import estimate

    for m, n, k, lp in ((11, 288, 4096, False), (11, 4096, 8192, True), (4456, 4096, 8192, True), (11, 4096, 12288, True)):
        ref, label = oracle.gemm("b60", "vllm", "0.26.0", "bfloat16", m, n, k, mode="EMPIRICAL", low_precision_input=lp)
        frame = pl.DataFrame({"system": ["b60"], "backend": ["vllm"], "version": ["0.26.0"], "quant": ["bfloat16"], "m": [m],
                              "n": [n], "k": [k], "low_precision_input": [lp]})
        row = estimate(wheel_est, "gemm", frame, mode="empirical").row(0, named=True)
        assert row["latency_ms"] == pytest.approx(ref, rel=1e-9) and row["source"] == label == "empirical"
