"""System specs and quant tables: parsing, bad input naming file/key, levels match the reference."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfledger.estimator.data.system_specs import load_spec, parse_spec
from perfledger.estimator.errors import MissingFlopsError, UnknownQuantError, UnknownSystemError
from perfledger.estimator.quant.profiles import profile_distance, quant_profile, util_level
from perfledger.versions import earlier_versions, version_key


def test_h200_spec_values():
    spec = load_spec("h200_sxm")
    assert spec.mem_bw == 4.8e12 and spec.tc_flops("fp8") == 1.978e15
    assert spec.p2p_bw(8) == 450e9 and spec.p2p_bw(16) == 50e9
    with pytest.raises(MissingFlopsError, match="fp4_tc_flops"):
        spec.tc_flops("fp4")


def test_gb200_rack_bandwidth():
    spec = load_spec("gb200")
    assert spec.p2p_bw(4) == 900e9 and spec.p2p_bw(72) == 900e9 and spec.p2p_bw(144) == 100e9


def test_unknown_system_names_it():
    with pytest.raises(UnknownSystemError, match="nosuch"):
        load_spec("nosuch")


def test_bad_spec_names_file_and_key(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("gpu: {mem_bw: 1}\nnode: {num_gpus_per_node: 8}\n")
    with pytest.raises(ValueError, match=r"x\.yaml: missing key node\.intra_node_bw"):
        parse_spec(path, "x")


def test_unknown_quant_lists_known():
    with pytest.raises(UnknownQuantError, match="fp7"):
        quant_profile("gemm", "fp7")


def test_levels_match_reference_tables(aic_core):
    for family, levels in (("gemm", aic_core.gemm_quant_util_levels()), ("moe", aic_core.moe_quant_util_levels())):
        for mem, comp, e in levels:
            assert util_level(family, (mem, comp)) == pytest.approx(e)


def test_gemm_profile_distance_is_compute_first():
    assert profile_distance("gemm", (0.5, 1), (2, 1)) < profile_distance("gemm", (1, 2), (0.5, 1))
    assert profile_distance("moe", (0.5, 1), (1, 2)) == (1.5,)


def test_version_order():
    assert version_key("1.3.0rc10") < version_key("1.3.0rc20") < version_key("1.3.0") < version_key("1.3.0.post1")
    assert earlier_versions("1.3.0rc20", ["1.2.0rc5", "1.3.0rc23", "1.3.0rc10", "weird"]) == ["1.3.0rc10", "1.2.0rc5"]


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20), st.integers(0, 30)), min_size=2, max_size=8))
def test_version_key_orders_like_tuples(parts):
    names = [f"{a}.{b}.{c}" for a, b, c in parts]
    assert sorted(names, key=version_key) == [f"{a}.{b}.{c}" for a, b, c in sorted(parts)]
