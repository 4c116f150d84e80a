"""The rule DSL: parsing, dependency order, fail-closed evaluation, and the shipped rule sets."""

import pytest

from perfledger.generator.errors import GeneratorError
from perfledger.generator.rule_apply import apply_rules, order_rules
from perfledger.generator.rule_parse import load_rule_set, parse_rules
from perfledger.generator.schema import load_schema

from .conftest import minimal, render

SCHEMA = load_schema()


def rules(text):
    return order_rules(parse_rules(text, "t.rule", SCHEMA), SCHEMA)


def doc(**roles):
    base = {"SlaConfig": {"isl": 100, "osl": 10}, "DynConfig": {}, "WorkerConfig": {"decode_workers": 1},
            "preserve_engine_limits": False}
    return {**base, "Workers": roles}


def test_readers_run_after_writers_regardless_of_file_order():
    """Reference defect 5: cuda-graph sizes were computed before max_batch_size was set."""
    ordered = rules(
        "[decode] cuda_graph_batch_sizes = cuda_graph_sizes(max_batch_size)\n"
        "[decode] max_batch_size = max_batch_size or 16\n")
    out, provenance = apply_rules(ordered, doc(decode={}), SCHEMA)
    assert out["Workers"]["decode"]["cuda_graph_batch_sizes"] == [1, 2, 4, 8, 16]
    assert provenance["Workers.decode.max_batch_size"] == "t.rule:2"


def test_shipped_rules_give_duplicate_free_graph_sizes_without_input_batch_size():
    for backend in ("vllm", "sglang", "trtllm"):
        files = render(minimal(backend, "disagg")).files
        args = files["cli_args_decode.yaml"] + files.get("decode_config.yaml", "")
        assert "512" in args, backend
    params = render(minimal("sglang")).files["cli_args_agg.yaml"]
    sizes = params.split("--cuda-graph-bs\n")[1].split("- --")[0].split()
    numbers = [int(s.strip("'")) for s in sizes if s != "-"]
    assert numbers == sorted(set(numbers)) and numbers[-1] == 512


def test_self_reading_rule_sees_the_previous_value():
    ordered = rules("[agg] max_batch_size = max_batch_size * 2\n[agg] max_batch_size = max_batch_size + 1\n")
    out, _ = apply_rules(ordered, doc(agg={"max_batch_size": 10}), SCHEMA)
    assert out["Workers"]["agg"]["max_batch_size"] == 21


def test_when_blocks_nest_by_indentation_and_skip_absent_roles():
    text = ("when SlaConfig.isl > 50:\n"
            "    [agg, prefill] max_num_tokens = SlaConfig.isl\n"
            "    when false:\n"
            "        [agg] max_seq_len = 1\n"
            "[agg] max_batch_size = 3\n")
    out, _ = apply_rules(rules(text), doc(agg={}), SCHEMA)
    assert out["Workers"]["agg"] == {"max_num_tokens": 100, "max_batch_size": 3}
    assert "prefill" not in out["Workers"]


def test_global_writes_and_role_reads():
    text = "BenchConfig.estimated_concurrency = WorkerConfig.decode_workers * decode.max_batch_size\n" \
           "[decode] max_batch_size = 32\n"
    out, _ = apply_rules(rules(text), {**doc(decode={}), "BenchConfig": {}}, SCHEMA)
    assert out["BenchConfig"]["estimated_concurrency"] == 32


@pytest.mark.parametrize("text, line, fragment", [
    ("[agg] max_batch_size = max_batch_sise\n", 1, "unknown name 'max_batch_sise'"),
    ("\n[agg] nonsense_key = 1\n", 2, "unknown worker key"),
    ("[agg, embed] max_batch_size = 1\n", 1, "scope roles"),
    ("[agg] max_batch_size = __import__('os')\n", 1, "only calls"),
    ("SlaConfig.isl == 3\n", 1, "expected"),
    ("[agg] SlaConfig.isl = 3\n", 1, "global write"),
    ("when x:\n", 1, "unknown name"),
    ("include common\n", 1, "include is only allowed"),
    ("[agg] max_batch_size = 1 +\n", 1, "cannot parse"),
])
def test_bad_rules_fail_with_file_and_line(text, line, fragment):
    with pytest.raises(GeneratorError) as info:
        parse_rules(text, "t.rule", SCHEMA)
    assert info.value.where == f"t.rule:{line}" and fragment in info.value.message


def test_cycles_are_rejected():
    with pytest.raises(GeneratorError, match="cycle"):
        rules("[agg] max_batch_size = max_num_tokens\n[agg] max_num_tokens = max_batch_size\n")


def test_evaluation_errors_fail_closed_with_rule_location():
    """Reference defect 7: rule errors were logged and the line skipped."""
    with pytest.raises(GeneratorError) as info:
        apply_rules(rules("[agg] max_num_tokens = max_batch_size + 1\n"), doc(agg={}), SCHEMA)
    assert info.value.where == "t.rule:1" and "role agg" in info.value.message


def test_rule_output_is_type_checked():
    with pytest.raises(GeneratorError, match=r"Workers.agg.max_batch_size \(set by t.rule:1\)"):
        apply_rules(rules("[agg] max_batch_size = 'many'\n"), doc(agg={}), SCHEMA)


@pytest.mark.parametrize("rule_set", ["production", "benchmark"])
@pytest.mark.parametrize("backend", ["vllm", "sglang", "trtllm"])
def test_shipped_rule_sets_load_and_order(rule_set, backend):
    assert order_rules(load_rule_set(rule_set, backend, SCHEMA), SCHEMA)


@pytest.mark.parametrize("name", ["nope", "../production", ".hidden", "common"])
def test_unknown_or_escaping_rule_sets_are_refused(name):
    with pytest.raises(GeneratorError, match="available: benchmark, production$"):
        load_rule_set(name, "vllm", SCHEMA)


def test_benchmark_keeps_batch_size_and_production_adds_headroom():
    d = minimal("vllm", Workers={"agg": {"tensor_parallel_size": 1, "max_batch_size": 64}})
    prod = render(d).files["cli_args_agg.yaml"]
    bench = render(d, ["rule=benchmark"]).files["cli_args_agg.yaml"]
    assert "--max-num-seqs\n  - '512'" in prod and "--max-num-seqs\n  - '64'" in bench


def test_preserve_engine_limits_skips_resizing():
    d = minimal("vllm", Workers={"agg": {"tensor_parallel_size": 1, "max_batch_size": 64}}, preserve_engine_limits=True)
    assert "--max-num-seqs\n  - '64'" in render(d).files["cli_args_agg.yaml"]


def test_moe_parallelism_is_folded_into_tp_and_gpu_count():
    d = minimal("vllm", ModelConfig={"is_moe": True}, Workers={"agg": {
        "moe_tensor_parallel_size": 2, "moe_expert_parallel_size": 4, "data_parallel_size": 2}})
    out = render(d).files
    assert "--tensor-parallel-size\n  - '4'" in out["cli_args_agg.yaml"]
    assert "gpu: '8'" in out["k8s_deploy.yaml"]
