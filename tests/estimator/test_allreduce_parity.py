"""Custom allreduce vs aiconfigurator-core 0.12.0 over every custom_allreduce_perf slice of the wheel.

sglang / vLLM tables hold a CUDA-graph and an eager row at each (num_gpus, message_size), in either file
order; gb300 tables also hold 8- and 16-GPU rows above its 4-GPU node. Queries: on-grid, off-grid, below
and beyond the message range; tp 1, collected, uncollected inside the range, above the node, beyond the data;
0.12.0 is asked in prefill and decode (it answers both alike, so the op takes no phase).
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from perfledger import settings
from perfledger.estimator.batch import estimate
from perfledger.estimator.errors import EstimatorError, NoDataError
from perfledger.estimator.ops.allreduce import RULE_YAML, CustomAllReduceModel, graph_rows, priced_count, row_rule

TABLE = CustomAllReduceModel.tables[0]
REL = 1e-6
TPS = (1, 2, 3, 4, 6, 8, 16, 32, 72)


def _wheel_slices() -> list[tuple[str, str, str]]:
    package = settings.aic_package_dir()
    if package is None:
        return []
    root = package / "systems"
    paths = (root / "data").glob(f"*/comm/*/*/{TABLE}.parquet")  # <system>/comm/<backend>/<version>/
    return sorted((p.parts[-5], p.parts[-3], p.parts[-2]) for p in paths)


SLICES = _wheel_slices()


@pytest.fixture
def unlisted(monkeypatch):
    """0.12.0 serves versions outside its queryable slots only when asked to (raw data coordinates)."""
    monkeypatch.setenv("AIC_ALLOW_UNLISTED_VERSIONS", "1")


def _queries(rng: np.random.Generator, count: int) -> list[tuple[int, int]]:
    """(hidden, tokens): on-grid, off-grid inside, below 128 elements, beyond 2^29 elements, then random."""
    grid = [(128, 2 ** int(rng.integers(0, 23))), (int(rng.integers(65, 8000)), int(rng.integers(2, 60_000))),
            (16, int(rng.integers(1, 8))), (7168, int(rng.integers(80_000, 1_000_000)))]
    extra = [(int(rng.integers(1, 9000)), int(rng.integers(1, 300_000))) for _ in range(max(0, count - len(grid)))]
    return (grid + extra)[:count]


def _ours(est, key: dict, elements: list[int], mode: str) -> list[tuple[float | None, str | None]]:
    """One batch per (slice, tp); a typed miss falls back to one-row batches so each row answers for itself."""
    def run(els):
        out = estimate(est, "allreduce", pl.DataFrame({**{k: [v] * len(els) for k, v in key.items()}, "elements": els}),
                       mode=mode.lower())
        return list(zip(out["latency_ms"].to_list(), out["source"].to_list(), strict=True))

    try:
        return run(elements)
    except EstimatorError:
        pass
    rows = []
    for el in elements:
        try:
            rows += run([el])
        except EstimatorError:
            rows.append((None, None))
    return rows


def _ref(oracle, handle, tp: int, hidden: int, tokens: int):
    """0.12.0's (latency, provenance) in prefill; decode must give the same answer."""
    from aiconfigurator_core.sdk.operations import CustomAllReduce

    ops = oracle.build([CustomAllReduce("ar", 1.0, int(hidden), int(tp))])
    got = []
    for ctx in (True, False):
        try:
            ms = handle.evaluate_ops_json(ops, is_context=ctx, batch_size=1, s=1, x=int(tokens))[0][1]
            got.append((ms, handle.last_provenance()))
        except Exception as exc:
            if "PerfDataNotAvailable" not in type(exc).__name__ and "Empirical" not in type(exc).__name__:
                raise
            got.append((None, None))
    assert got[0] == got[1], f"tp={tp} {hidden}x{tokens}: prefill {got[0]} vs decode {got[1]}"
    return got[0]


def _compare(est, oracle, slices, mode: str, per_tp: int, tps=TPS) -> dict:
    """Both miss, or agree within REL (and, off SILICON, on the label); returns counts for the floor checks."""
    stats = {"pairs": 0, "answered": 0, "worst": 0.0, "labels": set()}
    for system, backend, version in slices:
        handle = oracle.handle(system, backend, version, mode)
        rng = np.random.default_rng(zlib.crc32(f"{system}/{backend}/{version}/{mode}".encode()))
        for tp in tps:
            qs = _queries(rng, per_tp)
            key = {"system": system, "backend": backend, "version": version, "tp": tp}
            mine = _ours(est, key, [h * t for h, t in qs], mode)
            for (hidden, tokens), (ours, label) in zip(qs, mine, strict=True):
                ref, prov = _ref(oracle, handle, tp, hidden, tokens)
                what = f"{mode} {system}/{backend}/{version} tp={tp} elements={hidden * tokens}"
                assert (ours is None) == (ref is None), f"{what}: ours {ours} ref {ref}"
                stats["pairs"] += 1
                if ref is None:
                    continue
                stats["answered"] += 1
                stats["labels"].add(label)
                if mode != "SILICON":  # no provenance from the reference: plain silicon or the analytic tp=1 zero
                    assert label == prov if prov is not None else label in ("silicon", "sol"), f"{what}: {label} vs {prov}"
                err = abs(ours - ref) / ref if ref else abs(ours)
                assert err <= REL, f"{what}: ours {ours} ref {ref}"
                stats["worst"] = max(stats["worst"], err)
    return stats


# ---- pure logic -------------------------------------------------------------------------------------------

def _twins(first: str) -> pl.DataFrame:
    order = ["graph", "eager"] if first == "graph" else ["eager", "graph"]
    lat = {"graph": 0.004, "eager": 0.07}
    return pl.DataFrame({"kernel_source": [f"vLLM_custom_{k}" for k in order] * 2, "allreduce_dtype": ["bfloat16"] * 4,
                         "num_gpus": [2, 2, 4, 4], "message_size": [128] * 4, "latency": [lat[k] for k in order] * 2})


@pytest.mark.parametrize("first", ["graph", "eager"])
def test_graph_rows_win_whatever_the_file_order(first):
    rows = graph_rows(_twins(first), "h200_sxm")
    assert rows["kernel_source"].to_list() == ["vLLM_custom_graph"] * 2 and rows["latency"].to_list() == [0.004] * 2


def test_a_system_listed_to_keep_eager_rows_keeps_them_first_wins():
    rows = graph_rows(_twins("eager"), "b60")
    assert rows["latency"].to_list() == [0.07, 0.07]
    assert graph_rows(_twins("eager"), "h200_sxm", rule=((), frozenset())).height == 2  # an empty rule: first wins only


@pytest.mark.parametrize("tp,counts,want", [(2, [2, 4, 8, 16], 2), (8, [2, 4, 8, 16], 8), (6, [2, 4, 8, 16], 6),
                                            (72, [2, 4, 8, 16], 16), (8, [2, 4], 4), (3, [2], 2), (4, [], 4)])
def test_priced_count_reads_the_collected_count_or_the_largest_beyond_it(tp, counts, want):
    assert priced_count(tp, counts) == want


def test_the_shipped_rule_drops_eager_except_on_b60():
    drop, keep = row_rule()
    assert drop == ("_eager",) and keep == frozenset({"b60"})
    assert RULE_YAML.name == "allreduce.yaml"


@pytest.mark.parametrize("body,key", [("drop_kernel_sources_containing: _eager\nkeep_on_systems: [b60]\n",
                                       "drop_kernel_sources_containing"),
                                      ("drop_kernel_sources_containing: [_eager]\n", "keep_on_systems"),
                                      ("drop_kernel_sources_containing: ['']\nkeep_on_systems: []\n",
                                       "drop_kernel_sources_containing")])
def test_a_bad_rule_file_names_the_file_and_key(tmp_path: Path, body, key):
    path = tmp_path / "allreduce.yaml"
    path.write_text(body)
    with pytest.raises(ValueError, match=rf"{path}: key '{key}'"):
        row_rule(path)


# ---- real data ----------------------------------------------------------------------------------------------

@pytest.mark.aic
def test_every_sglang_and_vllm_table_holds_graph_and_eager_twins(wheel_est):
    """The premise of the rule: outside b60 and trtllm-layout tables, every key has a graph and an eager row."""
    twins = 0
    for system, backend, version in SLICES:
        raw = wheel_est.source.read(system, backend, version, TABLE)
        kinds = set(raw["kernel_source"].to_list())
        if any("_eager" in k for k in kinds) and system != "b60":
            per_key = raw.group_by(["num_gpus", "message_size"]).agg(
                graph=pl.col("kernel_source").str.ends_with("_graph").sum(),
                eager=pl.col("kernel_source").str.ends_with("_eager").sum())
            assert ((per_key["graph"] >= 1) & (per_key["eager"] >= 1)).all(), f"{system}/{backend}/{version}: a lone row"
            twins += 1
    assert twins >= 45


@pytest.mark.aic
@pytest.mark.parametrize("system,backend,version,kind", [("gb300", "vllm", "0.27.0", "graph"),  # eager rows first in file
                                                         ("h200_sxm", "sglang", "0.5.14", "graph"),
                                                         ("b60", "vllm", "0.26.0", "eager")])
def test_collected_points_read_the_rule_s_rows(wheel_est, system, backend, version, kind):
    raw = wheel_est.source.read(system, backend, version, TABLE)
    want = raw.filter(pl.col("kernel_source").str.ends_with(f"_{kind}") & (pl.col("num_gpus") == 2)).sort("message_size")
    q = pl.DataFrame({"system": system, "backend": backend, "version": version, "tp": 2, "elements": want["message_size"]})
    assert estimate(wheel_est, "allreduce", q)["latency_ms"].to_list() == want["latency"].to_list()


@pytest.mark.aic
def test_gb300_reads_its_8_and_16_gpu_rows_and_misses_6(wheel_est):
    """Above the 4-GPU node: a collected count reads its own (graph) row; 6 is uncollected inside the range."""
    raw = graph_rows(wheel_est.source.read("gb300", "sglang", "0.5.14", TABLE), "gb300")
    for tp in (8, 16):
        row = raw.filter((pl.col("num_gpus") == tp) & (pl.col("message_size") == 65536))
        q = pl.DataFrame({"system": "gb300", "backend": "sglang", "version": "0.5.14", "tp": tp, "elements": 65536})
        assert estimate(wheel_est, "allreduce", q).item(0, "latency_ms") == row.item(0, "latency")
    with pytest.raises(NoDataError, match=r"custom_allreduce_perf gb300/sglang/0.5.14: no rows for num_gpus=6"):
        estimate(wheel_est, "allreduce", pl.DataFrame({"system": "gb300", "backend": "sglang", "version": "0.5.14",
                                                       "tp": 6, "elements": 65536}))


# ---- parity -------------------------------------------------------------------------------------------------

@pytest.mark.aic
@pytest.mark.usefixtures("unlisted")
def test_silicon_matches_reference_on_every_slice(wheel_est, oracle):
    stats = _compare(wheel_est, oracle, SLICES, "SILICON", per_tp=5)
    assert len(SLICES) >= 70 and stats["pairs"] >= 3000 and stats["answered"] >= 2500, stats


@pytest.mark.aic
@pytest.mark.usefixtures("unlisted")
@pytest.mark.parametrize("mode", ["EMPIRICAL", "HYBRID"])
def test_empirical_and_hybrid_match_reference_with_labels_on_every_slice(wheel_est, oracle, mode):
    stats = _compare(wheel_est, oracle, SLICES, mode, per_tp=4, tps=(1, 2, 3, 4, 8, 16, 72))
    assert stats["pairs"] >= 2000 and stats["answered"] >= 1500, stats
    assert ({"empirical", "xshape"} if mode == "EMPIRICAL" else {"silicon"}) <= stats["labels"], stats


@pytest.mark.aic
def test_k3_on_gb300_sglang_tp8_prices_every_allreduce_like_the_reference(wheel_est, oracle):
    """The reported gap: K3 tp8/ep8 on gb300 sglang 0.5.14 (TP and dispatch allreduces on 8 GPUs), every op."""
    from perfledger.estimator.static import Deploy, static
    from tests.estimator.k3_reference import K3, assert_same_ops, reference

    shape = {"batch": 8, "isl": 4000, "osl": 200}
    ours = static(wheel_est, K3, Deploy("gb300", "sglang", "0.5.14", tp=8, moe_ep=8), **shape)
    ref = reference(oracle, "gb300", "sglang", "0.5.14", {"tp_size": 8, "moe_tp_size": 1, "moe_ep_size": 8}, shape)
    assert_same_ops(ours, ref, shape["osl"], rel=1e-9)
