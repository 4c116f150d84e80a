"""Bare-metal run scripts for workers spanning several nodes: packing, per-node rendezvous flags as data."""

import shlex

import pytest

from perfledger.generator.allowlist import allowed
from perfledger.generator.errors import GeneratorError
from perfledger.generator.mapping import load_mapping
from perfledger.generator.multinode import multinode_form, parse_form
from perfledger.generator.topology import pack

from .conftest import example, minimal, render


def _worker_lines(script: str) -> list[list[str]]:
    """argv of every worker launch line (CUDA_VISIBLE_DEVICES=... python3 -m dynamo.<b> ...)."""
    return [shlex.split(line)[:-1] for line in script.splitlines() if line.startswith("CUDA_VISIBLE_DEVICES=")]


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_spanning_replicas_take_whole_fresh_nodes_with_ranks():
    plan = pack([("decode", 1, 2), ("prefill", 2, 16), ("agg", 1, 4)], 8)
    shape = [[(p.role, p.replica, p.rank, p.nnodes, p.first_node, p.visible_devices) for p in node] for node in plan]
    full = "0,1,2,3,4,5,6,7"
    assert shape == [[("decode", 0, 0, 1, 0, "0,1")],
                     [("prefill", 0, 0, 2, 1, full)], [("prefill", 0, 1, 2, 1, full)],
                     [("prefill", 1, 0, 2, 3, full)], [("prefill", 1, 1, 2, 3, full)],
                     [("agg", 0, 0, 1, 5, "0,1,2,3")]]


def test_vllm_ranks_master_and_headless_followers():
    files = render(example("vllm_disagg_multinode")).files
    first, second = _worker_lines(files["run_0.sh"])[0], _worker_lines(files["run_1.sh"])[0]
    for rank, argv in enumerate((first, second)):
        assert argv[0] == "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7"
        assert (_flag(argv, "--nnodes"), _flag(argv, "--node-rank")) == ("2", str(rank))
        assert (_flag(argv, "--master-addr"), _flag(argv, "--master-port")) == ("10.0.0.1", "29500")
        assert _flag(argv, "--distributed-executor-backend") == "mp"
    assert "--headless" not in first and "--headless" in second
    assert "dynamo.frontend" in files["run_0.sh"] and "dynamo.frontend" not in files["run_1.sh"]
    decode = _worker_lines(files["run_2.sh"])
    assert [a[0] for a in decode] == ["CUDA_VISIBLE_DEVICES=0,1,2,3", "CUDA_VISIBLE_DEVICES=4,5,6,7"]
    assert not any("--nnodes" in a for a in decode)


def test_sglang_each_replica_meets_on_its_first_node():
    files = render(example("sglang_agg_multinode")).files
    endpoints = [(_flag(a, "--node-rank"), _flag(a, "--dist-init-addr"))
                 for n in range(4) for a in _worker_lines(files[f"run_{n}.sh"])]
    assert endpoints == [("0", "10.0.1.10:29600"), ("1", "10.0.1.10:29600"),
                         ("0", "10.0.1.12:29600"), ("1", "10.0.1.12:29600")]


@pytest.mark.parametrize("backend", ["vllm", "sglang"])
def test_multinode_flags_are_allowed_at_every_version_that_emits_them(backend):
    form = multinode_form(backend)
    emitted = 0
    for version in load_mapping().backends[backend]["versions"]:
        if form.unavailable(version):
            continue
        for rank in (0, 1):
            flags = form.flags_for(version, 2, rank, "10.0.0.1", 29500, "test")
            assert {f for f in flags if f.startswith("--")} <= allowed(backend, version), version
            emitted += 1
    assert emitted


def test_version_without_multinode_flags_skips_scripts_and_says_why():
    doc = minimal("vllm", Workers={"agg": {"tensor_parallel_size": 16}}, NodeConfig={"node_ips": ["10.0.0.1"]})
    out = render(doc, version="0.11.0")
    assert not any(n.startswith("run_") for n in out.files) and "k8s_deploy.yaml" in out.files
    assert any("vllm 0.11.0 has no per-node multi-node launch flags (needs >= 0.12.0)" in w for w in out.warnings)


def test_trtllm_multinode_is_refused_for_run_scripts_with_the_reason():
    out = render(minimal("trtllm", Workers={"agg": {"tensor_parallel_size": 16}}))
    assert not any(n.startswith("run_") for n in out.files)
    assert any("Workers.agg spans several nodes" in w and "MPI" in w for w in out.warnings)


def test_missing_master_address_names_the_node_ips_entry():
    doc = example("sglang_agg_multinode")
    doc["NodeConfig"]["node_ips"] = ["10.0.1.10", "10.0.1.11"]
    out = render(doc)
    assert not any(n.startswith("run_") for n in out.files)
    assert any("NodeConfig.node_ips[2] is not given" in w for w in out.warnings)


def test_unreachable_master_address_is_warned():
    out = render(minimal("sglang", Workers={"agg": {"tensor_parallel_size": 16}}))  # head_node_ip 0.0.0.0
    assert "run_1.sh" in out.files
    assert any("master address '0.0.0.0'" in w and "NodeConfig.node_ips" in w for w in out.warnings)


def test_master_address_that_reads_as_a_flag_is_refused():
    doc = example("sglang_agg_multinode")
    doc["NodeConfig"]["node_ips"][2] = "--evil"
    with pytest.raises(GeneratorError) as info:
        render(doc)
    assert info.value.where == "NodeConfig.node_ips[2]"


@pytest.mark.parametrize("raw, fragment", [
    ({"flags": [{"flag": "--nnodes", "value": "world_size"}]}, "unknown names ['world_size']"),
    ({"flags": [], "unsupported": "x"}, "expected `flags"),
    ({"flags": [{"flag": "--nnodes"}]}, "expected flag and value"),
    ({"flags": [{"flag": "--x", "value": "1", "kind": "list"}]}, "expected flag and value"),
    ({"since": "not-a-version", "flags": []}, "not a version"),
])
def test_bad_multinode_data_names_file_and_entry(raw, fragment):
    with pytest.raises(GeneratorError, match="backend_config_mapping.yaml: backends.vllm.multinode") as info:
        parse_form("vllm", raw)
    assert fragment in str(info.value)


def test_vllm_data_parallel_worker_across_nodes_is_not_given_the_tp_launch():
    doc = minimal("vllm", Workers={"agg": {"tensor_parallel_size": 8, "data_parallel_size": 2}},
                  NodeConfig={"node_ips": ["10.0.0.1"]})
    out = render(doc)
    assert not any(n.startswith("run_") for n in out.files)
    assert any("data_parallel_size > 1" in w for w in out.warnings)


def test_requires_names_worker_keys_only():
    with pytest.raises(GeneratorError, match="unknown worker keys"):
        parse_form("vllm", {"flags": [], "requires": {"expr": "world > 1", "reason": "x"}})
