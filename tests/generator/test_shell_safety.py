"""Property: a hostile string in any input field never changes the shell's parse of a generated script.

For each string field, the document is rendered once with a benign quoted placeholder and once with a
hostile string; bash parses both (declare -f prints its normalised parse without running anything) and
the two parses must be identical once every single-quoted word is blanked. Rejection with a
GeneratorError naming the field is the only other acceptable outcome. YAML artifacts must round-trip.
"""

import shlex
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from perfledger.generator.errors import GeneratorError

from .conftest import bash_n, example, parse_skeleton, render

PAYLOADS = ["; rm -rf / #", "$(touch /tmp/pwned)", "`id`", "a' b", 'x" ; echo "y', "line\nbreak; id",
            "${HOME}", "* ?", "&& reboot", "| tee /etc/x", "> /etc/passwd", "\\", "'\"'\"'", "$'\\x41'",
            "~root", "{a,b}", "!!", "tab\there", "#comment", "a=b c"]
hostile = st.one_of(st.sampled_from(PAYLOADS),
                    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                            min_size=1, max_size=30))


def _set(path: tuple) -> Callable[[dict[str, Any], Any], None]:
    def apply(doc: dict[str, Any], value: Any) -> None:
        node = doc
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return apply


# (example, target, setter): every free-text input field that reaches a script or manifest.
FIELDS = {
    "model_path": ("vllm_disagg", "dynamo", _set(("ServiceConfig", "model_path"))),
    "served_model_name": ("trtllm_disagg", "dynamo", _set(("ServiceConfig", "served_model_name"))),
    "head_node_ip": ("sglang_disagg", "dynamo", _set(("ServiceConfig", "head_node_ip"))),
    "k8s_envs value": ("vllm_agg", "dynamo", _set(("K8sConfig", "k8s_envs", "MY_VAR"))),
    "k8s_model_cache": ("vllm_agg", "llm-d-kustomize", _set(("K8sConfig", "k8s_model_cache"))),
    "k8s_image": ("sglang_agg", "dynamo", _set(("K8sConfig", "k8s_image"))),
    "bench_image": ("vllm_agg", "llm-d-helm", _set(("BenchConfig", "bench_image"))),
    "attention_backend": ("sglang_agg", "dynamo", _set(("Workers", "agg", "attention_backend"))),
    "extra_cli_args item": ("vllm_agg", "dynamo", lambda d, v: d["Workers"]["agg"].update(extra_cli_args=["--x", v])),
    "model_uri": ("vllm_disagg", "llm-d-helm", _set(("LlmdConfig", "model_uri"))),
    # master addresses of workers spanning nodes (per-node rendezvous flags in run_<n>.sh)
    "node_ips master (vllm)": ("vllm_disagg_multinode", "dynamo",
                               lambda d, v: d["NodeConfig"]["node_ips"].__setitem__(0, v)),
    "node_ips master (sglang)": ("sglang_agg_multinode", "dynamo",
                                 lambda d, v: d["NodeConfig"]["node_ips"].__setitem__(2, v)),
    "head_node_ip as master": ("sglang_agg_multinode", "dynamo", lambda d, v: (
        d["WorkerConfig"].update(agg_workers=1), d["NodeConfig"].pop("node_ips"),
        d["ServiceConfig"].update(head_node_ip=v))),
    "encode extra_cli_args item": ("vllm_agg_encode", "dynamo",
                                   lambda d, v: d["Workers"]["encode"].update(extra_cli_args=["--x", v])),
}
PLACEHOLDER = "benign value"


def _scripts(files):
    return {n: t for n, t in files.items() if n.endswith(".sh")}


@pytest.mark.parametrize("field", sorted(FIELDS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=hostile)
def test_hostile_strings_never_change_the_script_parse(field, value):
    assume(shlex.quote(value) != value)  # a safe word cannot change the parse; test the quoted case
    name, target, apply = FIELDS[field]
    benign_doc, hostile_doc = example(name), example(name)
    apply(benign_doc, PLACEHOLDER)
    apply(hostile_doc, value)
    benign = render(benign_doc, target=target)
    assert target != "dynamo" or "run_0.sh" in benign.files, "the field must reach a run script"
    try:
        evil = render(hostile_doc, target=target)
    except GeneratorError as exc:  # validation refused it: must say which field
        assert exc.where, exc
        return
    assert set(_scripts(evil.files)) == set(_scripts(benign.files))
    for file_name, text in _scripts(evil.files).items():
        bash_n(text)
        assert parse_skeleton(text) == parse_skeleton(benign.files[file_name]), file_name
    for file_name, text in evil.files.items():
        if file_name.endswith(".yaml"):
            list(yaml.safe_load_all(text))
    assert value in _leaves(yaml.safe_load(evil.files["generator_config.yaml"])), "value did not round-trip"


def _leaves(node):
    if isinstance(node, dict):
        return [leaf for v in node.values() for leaf in _leaves(v)]
    if isinstance(node, list):
        return [leaf for v in node for leaf in _leaves(v)]
    return [node]


def test_skeleton_detects_an_injection():
    """The oracle itself can fail: an unquoted value changes the skeleton."""
    safe = "python3 -m x --model 'a b' &\n"
    injected = "python3 -m x --model a; rm -rf / &\n"
    assert parse_skeleton(safe) != parse_skeleton(injected)


def test_values_starting_with_a_dash_cannot_become_flags():
    doc = example("vllm_agg")
    doc["ServiceConfig"]["model_path"] = "--trust-remote-code"
    with pytest.raises(GeneratorError) as info:
        render(doc)
    assert info.value.where == "ServiceConfig.model_path"


def test_hostile_model_name_lands_as_one_argument():
    doc = example("vllm_agg")
    doc["ServiceConfig"]["served_model_name"] = "x; touch /tmp/pwned"
    script = render(doc).files["run_0.sh"]
    assert "--served-model-name 'x; touch /tmp/pwned'" in script


def test_templates_never_interpolate_inside_double_quotes_or_comments():
    """A quoted word inside "..." or after # would not be one literal word; forbid it in the templates."""
    from pathlib import Path

    import perfledger.generator as generator

    templates = Path(generator.__file__).parent / "templates"
    for path in templates.glob("*.j2"):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if "{{" not in line or line.lstrip().startswith("<#"):
                continue
            before = line.split("{{", 1)[0]
            assert before.count('"') % 2 == 0, f"{path.name}:{number} interpolates inside double quotes"
            assert "#" not in before.replace("${#", ""), f"{path.name}:{number} interpolates in a comment"
