"""Needs with alternatives (needs.yaml `any_of`, ledger/matrix/needs.py and choices.py): parsing, resolution, messages."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfledger.estimator.models.config_expr import ConfigExprError
from perfledger.ledger.matrix.build import weakest
from perfledger.ledger.matrix.choices import resolve_choice
from perfledger.ledger.matrix.needs import Choice, Need, Option, derive_needs, load_needs, quant_labels
from perfledger.ledger.matrix.rules import load_rules

TIERS = load_rules().source_tiers
DOC = load_needs()
DIMS = {"hidden": 7168, "heads": 96, "kv_heads": 96, "head_dim": 128, "q_lora_rank": 1536, "kv_lora_rank": 512,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}


def need(name: str, table: str = "t_perf") -> Need:
    return Need(name, name, table, "context", ())


def prices(outcomes: dict[str, str | None]):
    """A cell's answers by op name: a tier, or None for a miss (the reason names the op's table)."""
    def price_one(n: Need):
        tier = outcomes[n.name]
        return (tier, None) if tier else (None, f"{n.name} (context, {n.table}): no {n.table} rows")
    return price_one


def resolve(choice: Choice, outcomes: dict, backend: str = "vllm"):
    return resolve_choice(choice, backend, prices(outcomes), lambda t: weakest(t, TIERS))


MLA = Choice("mla_context_attention", "context", (
    Option((need("module", "mla_context_module_perf"),)),
    Option((need("q_b_proj", "gemm_perf"), need("context_attention", "context_attention_perf")), ("vllm",)),
    Option((need("q_b_proj", "gemm_perf"), need("context_mla", "context_mla_perf")), ("sglang", "trtllm")),
))


def test_the_first_option_priced_by_silicon_wins():
    tier, err, option = resolve(MLA, {"module": "silicon", "q_b_proj": "silicon", "context_attention": "silicon"})
    assert (tier, err, option) == ("silicon", None, MLA.options[0])


def test_a_later_option_with_rows_beats_an_earlier_transfer():
    tier, _, option = resolve(MLA, {"module": "xshape", "q_b_proj": "silicon", "context_attention": "silicon"})
    assert (tier, option.label) == ("silicon", "q_b_proj + context_attention")


def test_without_silicon_the_first_priced_option_wins_with_its_weakest_tier():
    tier, _, option = resolve(MLA, {"module": "xquant", "q_b_proj": "silicon", "context_attention": "xshape"})
    assert (tier, option.label) == ("xquant", "module")
    tier, _, option = resolve(MLA, {"module": None, "q_b_proj": "xprofile", "context_attention": "xshape"})
    assert (tier, option.label) == ("xprofile", "q_b_proj + context_attention")


def test_an_option_of_another_backend_is_never_tried():
    outcomes = {"module": None, "q_b_proj": "silicon", "context_attention": "silicon", "context_mla": "silicon"}
    assert resolve(MLA, outcomes, "sglang")[2].label == "q_b_proj + context_mla"
    assert resolve(MLA, outcomes, "vllm")[2].label == "q_b_proj + context_attention"


def test_none_priced_names_every_options_reason_in_order():
    tier, err, option = resolve(MLA, {"module": None, "q_b_proj": "silicon", "context_attention": None})
    assert tier is None and option is None
    assert err == ("mla_context_attention (context): no alternative priced: "
                   "[1] module (context, mla_context_module_perf): no mla_context_module_perf rows; "
                   "[2] context_attention (context, context_attention_perf): no context_attention_perf rows; "
                   "[3] q_b_proj + context_mla: not used by vllm (only sglang, trtllm)")


@given(st.lists(st.tuples(st.lists(st.sampled_from([None, *TIERS]), min_size=1, max_size=3),
                          st.sampled_from([(), ("vllm",), ("sglang",)])), min_size=1, max_size=4),
       st.sampled_from(["vllm", "sglang"]))
def test_resolution_properties(spec, backend):
    """The winner applies to the backend and is fully priced; no earlier applicable option was all-silicon; a
    silicon winner is the first all-silicon option; a miss reports one reason per option."""
    outcomes, options = {}, []
    for i, (tiers, backends) in enumerate(spec):
        names = [f"op{i}_{j}" for j in range(len(tiers))]
        outcomes.update(zip(names, tiers, strict=True))
        options.append(Option(tuple(need(n) for n in names), backends))
    choice = Choice("x", "context", tuple(options))
    tier, err, option = resolve(choice, outcomes, backend)
    usable = [o for o in options if not o.backends or backend in o.backends]
    priced = [o for o in usable if all(outcomes[n.name] for n in o.needs)]
    silicon = [o for o in priced if all(outcomes[n.name] == "silicon" for n in o.needs)]
    if not priced:
        assert tier is None and option is None and len(re.findall(r"\[\d+\] ", err)) == len(options)
    else:
        assert option in priced and err is None
        assert option == (silicon or priced)[0]
        assert tier == weakest([outcomes[n.name] for n in option.needs], TIERS)


def doc_with(template: dict) -> dict:
    return {**DOC, "architectures": {"X": ["c"]}, "components": {"c": [template]}}


def test_any_of_in_needs_yaml_becomes_a_choice_per_phase():
    doc = doc_with({"name": "attn", "phases": ["generation"], "any_of": [
        {"ops": [{"name": "module", "op": "mla_generation_module", "query": {"heads": "heads // tp", "q": "quant.kv"}}]},
        {"backends": ["sglang"], "ops": [
            {"name": "pre", "op": "mla_bmm", "fixed": {"phase": "pre"}, "query": {"quant": "quant.bmm"}},
            {"name": "skipped", "op": "gemm", "when": "tp > 8", "query": {}}]}]})
    out = derive_needs("X", DIMS, {"gemm": "fp8_block"}, "disagg", doc)
    assert len(out) == 1 and isinstance(out[0], Choice) and (out[0].name, out[0].phase) == ("attn", "generation")
    module, bmm = out[0].options
    assert module.backends == () and module.needs == (
        Need("module", "mla_generation_module", "mla_generation_module", "generation", (("heads", 96), ("q", "bfloat16"))),)
    assert bmm.backends == ("sglang",) and [n.name for n in bmm.needs] == ["pre"]  # `when` false: left out
    assert dict(bmm.needs[0].query) == {"quant": "fp8", "phase": "pre"}  # quant_derived: fp8_block GEMMs -> fp8 BMMs


def test_derived_quant_labels_follow_their_source_unless_the_spec_sets_them():
    assert quant_labels(DOC, {})["bmm"] == "bfloat16"
    assert quant_labels(DOC, {"gemm": "fp8_block"})["bmm"] == "fp8"
    assert quant_labels(DOC, {"gemm": "fp8_block", "bmm": "bfloat16"})["bmm"] == "bfloat16"


@pytest.mark.parametrize("template, message", [
    ({"name": "a", "any_of": []}, "components.c[0].any_of: expected a non-empty list of options"),
    ({"name": "a", "op": "gemm", "any_of": [{"ops": [{"op": "gemm"}]}]}, "components.c[0].any_of: expected a non-empty list"),
    ({"any_of": [{"ops": [{"op": "gemm"}]}]}, "components.c[0].name: an any_of need needs a name"),
    ({"name": "a", "any_of": [{"op": "gemm"}]}, "components.c[0].any_of[0]: expected {ops: [op templates]"),
    ({"name": "a", "any_of": [{"ops": []}]}, "components.c[0].any_of[0]: expected {ops: [op templates]"),
    ({"name": "a", "any_of": [{"ops": [{"op": "gemm"}], "backend": ["vllm"]}]}, "components.c[0].any_of[0]: expected"),
    ({"name": "a", "any_of": [{"ops": [{"op": "gemm"}], "backends": "vllm"}]},
     "components.c[0].any_of[0].backends: expected a list of backend names"),
    ({"name": "a", "any_of": [{"ops": [{"query": {}}]}]},
     "components.c[0].any_of[0].ops[0]: expected a mapping with an `op` (or `any_of`)"),
    ({"name": "a", "any_of": [{"ops": [{"op": "gemm", "query": {"m": "tokns"}}]}]},
     "components.c[0].any_of[0].ops[0].query.m: unknown name 'tokns'"),
])
def test_bad_any_of_entries_name_the_key(template, message):
    with pytest.raises(ConfigExprError, match=re.escape(f"needs.yaml: {message}")):  # NeedsError is one
        derive_needs("X", DIMS, {}, "agg", doc_with(template))


def _mla_choices(model: str) -> dict:
    from perfledger.ledger.matrix.build import model_needs
    from perfledger.ledger.specs import find_spec

    return {(n.name, n.phase): n for n in model_needs(find_spec(model), ("agg",))["agg"]
            if isinstance(n, Choice) and n.name.startswith("mla_")}


def test_k3_tries_the_mla_module_on_vllm_only_deepseek_v3_everywhere():
    """needs.yaml `mla_k3`: K3's module options are pinned to vLLM (0.12.0's sglang and trtllm K3 plans are split);
    DeepSeek-V3's `mla` keeps trying the module first on every backend (0.12.0: module, split fallback)."""
    k3, v3 = _mla_choices("kimi-k3"), _mla_choices("deepseek-v3")
    assert set(k3) == set(v3) == {("mla_context_attention", "context"), ("mla_generation_attention", "generation")}
    for key in k3:
        assert [o.backends for o in k3[key].options] == [("vllm",), ("vllm",), ("sglang", "trtllm")]
        assert [o.backends for o in v3[key].options] == [(), ("vllm",), ("sglang", "trtllm")]
        assert [o.label for o in k3[key].options] == [o.label for o in v3[key].options]  # same templates otherwise


@pytest.mark.aic
def test_k3_on_trtllm_prices_the_estimators_plan_and_fails_on_the_kda_lane():
    """Over the wheel's trtllm tables: K3's MLA resolves to the split ops (DeepSeek-V3's to trtllm's module
    tables), its KDA needs to chunk_kda and the decode pair on the roofline (tier sol), the 896-expert MoE to a
    HYBRID transfer; every op need priced, the row FAILs on K3's kda collection lane (trtllm never has kda rows).
    The imported 0.12.0 matrix FAILs h200 on the SILICON MoE miss and HYBRID_PASSes gb300."""
    import polars as pl

    from perfledger.estimator.batch import estimate
    from perfledger.estimator.ops.registry import registry
    from perfledger.estimator.session import Estimator, open_source
    from perfledger.ledger.matrix.build import Pricer, judge, model_needs
    from perfledger.ledger.matrix.reader import read_matrix
    from perfledger.ledger.specs import find_spec
    from tests.ledger.curated import MATRIX_STATES

    est = Estimator(open_source("aic-package"))
    pricer = Pricer(lambda op, q, mode: estimate(est, op, q, mode=mode), frozenset(registry()), TIERS)
    spec = find_spec("kimi-k3")
    needs = model_needs(spec, ("agg",))["agg"]
    head = read_matrix(MATRIX_STATES / "head-095f58a")
    for system, imported in (("h200_sxm", "FAIL"), ("gb300", "HYBRID_PASS")):
        cell = (system, "trtllm", "1.3.0rc20")

        def win(choice, c=cell):
            tier, err, option = resolve_choice(choice, c[1], lambda need: pricer.need(need, c), lambda t: weakest(t, TIERS))
            return tier, option.label if option else err

        got = {(n.name, n.phase): win(n) if isinstance(n, Choice) else pricer.any(n, cell)[0] for n in needs}
        assert got[("mla_context_attention", "context")] == ("silicon", "q_b_proj + kv_b_proj + context_mla + o_proj")
        assert got[("mla_generation_attention", "generation")] == (
            "silicon", "q_b_proj + mla_bmm_pre + generation_mla + mla_bmm_post + o_proj")
        assert got[("kda_scan", "context")] == ("sol", "chunk_kda")
        assert got[("kda_decode", "generation")] == ("sol", "causal_conv1d_update + fused_recurrent_kda_packed_decode")
        assert (got[("causal_conv1d_fn_qkv3", "context")], got[("moe_experts", "context")]) == ("sol", "xshape")
        assert all(v if not isinstance(v, tuple) else v[0] for v in got.values())
        v3 = _mla_choices("deepseek-v3")[("mla_context_attention", "context")]
        assert win(v3)[1] == "mla_context_module"
        status, err, _ = judge(spec, cell, needs, pricer, {})
        assert (status, err) == ("FAIL", f"lane kda (kda_perf): no collected rows for {system}/trtllm at 1.3.0rc20 "
                                         "[+1 more unpriced: lane mla_bmm.96fam]")
        theirs = head.filter((pl.col("HuggingFaceID") == "moonshotai/Kimi-K3") & (pl.col("System") == system)
                             & (pl.col("Backend") == "trtllm") & (pl.col("Version") == "1.3.0rc20"))
        assert set(theirs["Status"]) == {imported}
