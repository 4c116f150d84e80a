"""Attention lane order: the plain density walk and the static engine's framework-default pin (ops/attention/kernel_lanes.py)."""

from __future__ import annotations

import pytest

from perfledger.estimator.ops.attention.context import LANE_COLUMNS
from perfledger.estimator.ops.attention.kernel_lanes import framework_default, lane_order, pinned_walk

DEFAULTS = {"sglang": {"0.5.14": {90: "fa3", 100: "triton", 120: "flashinfer"}, "0.5.20": {120: "triton"}},
            "vllm": {"0.24.0": {90: "default"}}}


def test_framework_default_floors_in_the_one_version_order():
    """perfledger.versions (PEP 440): a pre-release of a listed version floors below it, a post release to it."""
    assert framework_default(DEFAULTS, "sglang", "0.5.20rc1", 120) == (True, "flashinfer")  # below 0.5.20: 0.5.14's
    assert framework_default(DEFAULTS, "sglang", "0.5.20.post1", 120) == (True, "triton")


@pytest.mark.parametrize("backend,version,sm,expected", [
    ("sglang", "0.5.14", 120, (True, "flashinfer")),
    ("sglang", "0.5.16", 100, (True, "triton")),      # floor match: highest listed version <= query
    ("sglang", "0.5.14.post2", 90, (True, "fa3")),
    ("sglang", "0.5.20", 120, (True, "triton")),
    ("sglang", "0.5.20", 100, (False, None)),         # sm matched exactly in the floor version only
    ("sglang", "0.5.10", 120, (False, None)),         # below every listed version
    ("sglang", "0.5.14", 103, (False, None)),
    ("sglang", "0.5.14", None, (False, None)),
    ("vllm", "0.24.0", 90, (True, None)),             # a `default` entry: matched, pins nothing
    ("trtllm", "1.3.0rc20", 100, (False, None)),
])
def test_framework_default_matching(backend, version, sm, expected):
    assert framework_default(DEFAULTS, backend, version, sm) == expected


def test_pinned_walk_tiers():
    """Head; own-version lanes (known by density, `default`, others by density); then lanes only donors carry."""
    own = {"triton": (5, 50), "flashinfer": (9, 10), "default": (99, 99), "vllm_fa2": (50, 1), "fa3": (9, 20)}
    shared = {**own, "trtllm_mha": (100, 100), "flash_attention": (1, 1), "fla": (0, 1)}
    assert pinned_walk("flashinfer", own, shared) == ["flashinfer", "fa3", "triton", "default", "vllm_fa2",
                                                      "trtllm_mha", "fla", "flash_attention"]
    assert pinned_walk(None, {}, {"b": (1, 1), "triton": (1, 1), "a": (2, 1)}) == ["triton", "a", "b"]
    assert pinned_walk("fa3", {}, {}) == ["fa3"]  # a pinned lane the table lacks stays first (lane_slice skips it)


@pytest.mark.aic
def test_lane_order_pins_only_with_a_defaults_entry(wheel_est):
    rtx = lane_order(wheel_est, "rtx_pro_6000_server", "sglang", "0.5.14", "context_attention_perf", LANE_COLUMNS)
    pinned = lane_order(wheel_est, "rtx_pro_6000_server", "sglang", "0.5.14", "context_attention_perf", LANE_COLUMNS, True)
    assert rtx[0] == "triton" and pinned[0] == "flashinfer" and sorted(rtx) == sorted(pinned)
    b200 = lane_order(wheel_est, "b200_sxm", "sglang", "0.5.14", "generation_attention_perf", LANE_COLUMNS[1:], True)
    assert b200[0] == "triton"
    # no entry for trtllm: the plain density walk either way
    for table in ("context_attention_perf", "generation_attention_perf"):
        args = ("h200_sxm", "trtllm", "1.3.0rc20", table, LANE_COLUMNS[1:])
        assert lane_order(wheel_est, *args, True) == lane_order(wheel_est, *args)


@pytest.mark.aic
def test_missing_defaults_file_means_no_pin(monkeypatch, tmp_path):
    """A wheel without systems/attention_lane_defaults.yaml: static walks lanes by density, like the op level."""
    from perfledger import settings
    from perfledger.estimator.session import Estimator, open_source

    est = Estimator(open_source("aic-package"))
    monkeypatch.setattr(settings, "aic_package_dir", lambda: tmp_path)
    args = ("rtx_pro_6000_server", "sglang", "0.5.14", "context_attention_perf", LANE_COLUMNS)
    assert lane_order(est, *args, True) == lane_order(est, *args) and lane_order(est, *args)[0] == "triton"


@pytest.mark.aic
def test_malformed_defaults_file_names_it(monkeypatch, tmp_path):
    from perfledger import settings
    from perfledger.estimator.session import Estimator, open_source

    est = Estimator(open_source("aic-package"))
    (tmp_path / "systems").mkdir()
    (tmp_path / "systems" / "attention_lane_defaults.yaml").write_text("- just\n- a list\n")
    monkeypatch.setattr(settings, "aic_package_dir", lambda: tmp_path)
    with pytest.raises(ValueError, match="attention_lane_defaults.yaml: expected a mapping"):
        lane_order(est, "rtx_pro_6000_server", "sglang", "0.5.14", "context_attention_perf", LANE_COLUMNS, True)


@pytest.mark.aic
@pytest.mark.parametrize("system,backend,version", [
    ("rtx_pro_6000_server", "sglang", "0.5.14"), ("gb200", "sglang", "0.5.14"), ("b300_sxm", "sglang", "0.5.16"),
    ("h200_sxm", "sglang", "0.5.14"),
    ("b200_sxm", "vllm", "0.24.0"),  # a `default` entry: own-version lanes before the donor-only vllm_flashinfer
])
def test_pinned_order_is_the_reference_static_order_over_present_lanes(wheel_est, oracle, system, backend, version):
    """0.12.0's static lane order (resolved_lane_order_for_op), restricted to the lanes the table holds, is ours."""
    from aiconfigurator_core.sdk.operations.attention import resolved_lane_order_for_op

    db = oracle.get_database(system, backend, version)
    for attr, table, columns in (("_context_attention_data", "context_attention_perf", LANE_COLUMNS),
                                 ("_generation_attention_data", "generation_attention_perf", LANE_COLUMNS[1:])):
        ours = lane_order(wheel_est, system, backend, version, table, columns, True)
        assert ours and [lane for lane in resolved_lane_order_for_op(db, attr) if lane in ours] == ours
