"""The rule/default expression language: what it computes and what it refuses."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfledger.generator.errors import GeneratorError
from perfledger.generator.expr import FUNCTIONS, parse_expr


def run(source, **names):
    return parse_expr(source, "t").evaluate(lambda n: names[n])


@pytest.mark.parametrize("source, names, expected", [
    ("(tp or 1) * (pp or 1)", {"tp": None, "pp": 4}, 4),
    ("512 if (bs or 0) < 512 else bs * 2", {"bs": 600}, 1200),
    ("SlaConfig.isl + 1500", {"SlaConfig.isl": 4000}, 5500),
    ("round_up(isl + 500, 64)", {"isl": 4000}, 4544),
    ("not true and x", {"x": 1}, False),
    ("v in ['a', 'b']", {"v": "b"}, True),
    ("x is None", {"x": None}, True),
])
def test_evaluates(source, names, expected):
    assert run(source, **names) == expected


def test_names_are_dotted_and_exclude_functions():
    expr = parse_expr("max(SlaConfig.isl, decode.max_batch_size) + tp", "t")
    assert expr.names == {"SlaConfig.isl", "decode.max_batch_size", "tp"}


@pytest.mark.parametrize("source", [
    "__import__('os').system('id')", "x.__class__", "(lambda: 1)()", "a[0]", "f'{x}'",
    "open('/etc/passwd')", "[i for i in range(3)]", "x := 1", "2 ** 1000", "max(key=len)",
])
def test_refuses_unsafe_syntax(source):
    with pytest.raises(GeneratorError) as info:
        parse_expr(source, "rules/x.rule:7")
    assert info.value.where == "rules/x.rule:7"


def test_string_repetition_is_refused():
    with pytest.raises(TypeError):
        run("s * 1000000", s="ab")


@given(st.integers(min_value=1, max_value=4096))
def test_cuda_graph_sizes_sorted_unique_and_capped(bs):
    sizes = FUNCTIONS["cuda_graph_sizes"](bs)
    assert sizes == sorted(set(sizes)) and sizes[0] == 1 and sizes[-1] == bs


@settings(max_examples=200)
@given(st.text(max_size=40))
def test_dns_label_is_always_rfc1123(text):
    label = FUNCTIONS["dns_label"](text)
    assert 1 <= len(label) <= 40 and label[0].isalnum() and label[-1].isalnum()
    assert all(c.islower() or c.isdigit() or c == "-" for c in label) and label.isascii()
