"""Cell derivation over curated-like frames: real K3 data from ../shared and the wheel, and unit rules."""

from dataclasses import replace

import polars as pl
import pytest

from perfledger.ledger.cells import derive_cells, derive_lane_cells, mismatches
from perfledger.ledger.specs import LaneSpecError, find_spec
from tests.ledger.curated import SHARED_DATA, read_tree_table, wheel_systems

pytestmark = pytest.mark.xdist_group("ledger-test_cells")

K3 = find_spec("kimi-k3")


def tables(root):
    return {t: read_tree_table(root, t) for t in dict.fromkeys(lane.table for lane in K3.lanes)}


@pytest.fixture(scope="module")
def shared_cells():
    return derive_cells(K3, tables(SHARED_DATA))


def rows_of(cells, lane, system, backend, version):
    hit = cells.filter((pl.col("lane") == lane) & (pl.col("system") == system) & (pl.col("backend") == backend)
                       & (pl.col("version") == version))
    assert hit.height == 1
    return hit.row(0, named=True)


@pytest.mark.parametrize(("lane", "system", "backend", "version", "rows"), [
    ("kda", "b200_sxm", "sglang", "0.5.16", 976),
    ("kda", "h100_sxm", "sglang", "0.5.16", 1085),
    ("kda", "l40s", "sglang", "0.5.16", 1074),
    ("kda", "b200_sxm", "vllm", "0.1.dev19262", 1203),
    ("kda", "l40s", "vllm", "0.1.dev19262", 1145),
    ("moe.k3", "b200_sxm", "sglang", "0.5.14", 6156),
    ("moe.k3", "b300_sxm", "sglang", "0.5.14", 3078),
    ("moe.k3", "h200_sxm", "sglang", "0.5.14", 488),
    ("moe.k3", "l40s", "sglang", "0.5.14", 2997),
    ("moe.k3", "gb200", "vllm", "0.24.0", 972),
    ("mla_bmm.96fam", "b200_sxm", "sglang", "0.5.14", 424),
    ("mla_bmm.96fam", "h100_sxm", "vllm", "0.24.0", 212),
    ("megamoe.module", "b200_sxm", "sglang", "0.5.16", 64),
])
def test_k3_rows_from_shared(shared_cells, lane, system, backend, version, rows):
    cell = rows_of(shared_cells, lane, system, backend, version)
    assert cell["rows"] == rows
    assert cell["status"] == "done"


def test_k3_shared_summary(shared_cells):
    assert shared_cells.height == 40
    assert dict(shared_cells.group_by("status").len().iter_rows()) == {"done": 38, "missing": 2}
    missing = shared_cells.filter(pl.col("status") == "missing").select("lane", "system", "backend").rows()
    assert sorted(missing) == [("moe.k3", "l40s", "vllm"), ("moe.k3", "rtx_pro_6000_server", "vllm")]
    assert mismatches(shared_cells) == []


def test_k3_kernel_sources_dtypes_phases(shared_cells):
    moe = rows_of(shared_cells, "moe.k3", "h100_sxm", "sglang", "0.5.14")
    assert moe["kernel_sources"] == ["sglang_marlin_moe_situ_as_silu"]
    b200 = rows_of(shared_cells, "moe.k3", "b200_sxm", "sglang", "0.5.14")
    assert b200["dtype_rows"] == ["w4a16_mxfp4=3078", "w4a8_mxfp4_mxfp8=3078"]
    kda = rows_of(shared_cells, "kda", "b200_sxm", "sglang", "0.5.16")
    assert kda["phases"] == ["context", "generation", "verify"]
    assert "kda_fused_decode" in kda["kernel_sources"]


def test_k3_from_wheel_flags_unexpected_cells():
    cells = derive_cells(K3, tables(wheel_systems() / "data"))
    unexpected = cells.filter(pl.col("status") == "unexpected").select("lane", "system", "backend", "version").rows()
    assert ("kda", "gb300", "vllm", "0.27.0") in unexpected
    assert cells.filter(pl.col("expected")).height == 40


def test_suffix_rule_flags_unlabelled_approximation(shared_cells):
    lane = K3.lane("moe.k3")
    frame = read_tree_table(SHARED_DATA, "moe_perf").filter(pl.col("system") == "h100_sxm")
    relabelled = frame.with_columns(pl.col("kernel_source").str.replace("_situ_as_silu", ""))
    cells = derive_lane_cells(K3, lane, relabelled)
    cell = cells.filter((pl.col("system") == "h100_sxm") & (pl.col("backend") == "sglang")).row(0, named=True)
    assert cell["suffix_violations"] == 541
    assert any(m["kind"] == "suffix_rule" and m["rows"] == 541 for m in mismatches(cells))
    # b200/b300 vLLM rows ran in the native-SiTU preview runtime: no suffix needed.
    assert rows_of(shared_cells, "moe.k3", "b200_sxm", "vllm", "0.24.0")["suffix_violations"] == 0


def test_claim_drift_and_partial_status():
    lane = replace(K3.lane("kda"), claims=(replace(K3.lane("kda").claims[0], rows=1096),))
    frame = read_tree_table(SHARED_DATA, "kda_perf").filter(pl.col("system") == "l40s")
    meta = pl.DataFrame({"system": ["l40s"], "backend": ["vllm"], "version": ["0.1.dev19262"],
                         "meta_status": ["partial"], "meta_collected_at": ["2026-08-01"], "meta_image": ["img"]})
    cells = derive_lane_cells(K3, lane, frame, meta)
    sglang = cells.filter((pl.col("backend") == "sglang") & (pl.col("system") == "l40s")).row(0, named=True)
    assert (sglang["claim"], sglang["rows"], sglang["status"]) == (1096, 1074, "partial")
    assert mismatches(cells)[0] == {"lane": "kda", "system": "l40s", "backend": "sglang", "version": "0.5.16",
                                    "kind": "claim", "claim": 1096, "actual": 1074, "delta": -22}
    vllm = cells.filter((pl.col("backend") == "vllm") & (pl.col("system") == "l40s")).row(0, named=True)
    assert (vllm["status"], vllm["meta_collected_at"]) == ("partial", "2026-08-01")
    others = cells.filter(pl.col("system") != "l40s")
    assert set(others["status"]) == {"missing"} and set(others["rows"]) == {0}


def test_empty_table_gives_missing_cells():
    cells = derive_cells(K3, {})
    assert cells.height == 40 and set(cells["status"]) == {"missing"}


def test_filter_on_absent_column_names_yaml_and_key():
    frame = read_tree_table(SHARED_DATA, "kda_perf").head(5).drop("model_name")
    with pytest.raises(LaneSpecError, match=r"kimi-k3.yaml: lanes\[0\].filter.model_name"):
        derive_lane_cells(K3, K3.lane("kda"), frame)


def test_deepseek_spec_uses_the_same_code():
    spec = find_spec("deepseek-v3")
    cells = derive_cells(spec, {t: read_tree_table(SHARED_DATA, t) for t in ("moe_perf", "mla_bmm_perf")})
    b200 = cells.filter((pl.col("lane") == "moe.v3") & (pl.col("system") == "b200_sxm") & (pl.col("backend") == "sglang"))
    assert b200["rows"].to_list() == [6318]
    assert {"done", "unexpected"} <= set(cells["status"])


@pytest.mark.parametrize("name", ["deepseek-v3.2", "gpt-oss-120b"])
def test_more_lane_specs_count_what_the_wheel_holds(name):
    """Each expected cell's rows equal a count of the wheel's Parquet files under the lane's filter, read
    file by file with pyarrow (not through the ledger's frame path); every expected cell of these specs has data."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    spec, root = find_spec(name), wheel_systems() / "data"
    cells = derive_cells(spec, {t: read_tree_table(root, t) for t in dict.fromkeys(lane.table for lane in spec.lanes)})
    expected = cells.filter(pl.col("expected"))
    assert expected.height and set(expected["status"]) <= {"done", "partial"}
    for cell in expected.iter_rows(named=True):
        lane = spec.lane(cell["lane"])
        total = 0
        for path in root.glob(f"{cell['system']}/*/{cell['backend']}/{cell['version']}/{lane.table}.parquet"):
            table = pq.read_table(path)
            mask = None
            for column, value in lane.filter.items():
                hit = pc.is_in(table[column], value_set=pa_array(value, table[column].type))
                mask = hit if mask is None else pc.and_(mask, hit)
            total += pc.sum(pc.cast(mask, "int64")).as_py() or 0
        assert cell["rows"] == total, (cell["lane"], cell["system"], cell["backend"], cell["version"])


def pa_array(value, kind):
    import pyarrow as pa

    return pa.array(value if isinstance(value, list) else [value], type=kind)
