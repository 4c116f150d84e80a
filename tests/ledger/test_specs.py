"""Lane-spec loading: the real specs, and bad specs rejected with file + key."""

from pathlib import Path

import pytest
import yaml

from perfledger.ledger.specs import LANES_DIR, LaneSpecError, find_spec, load_all, load_spec

K3 = LANES_DIR / "kimi-k3.yaml"


def test_real_specs_load():
    specs = {s.model: s for s in load_all()}
    assert {"moonshotai/Kimi-K3", "deepseek-ai/DeepSeek-V3"} <= set(specs)
    k3 = specs["moonshotai/Kimi-K3"]
    assert k3.architecture == "KimiK3ForConditionalGeneration"
    assert [lane.lane_id for lane in k3.lanes] == ["kda", "moe.k3", "mla_bmm.96fam", "megamoe.module"]
    assert len(k3.systems) == 8
    assert k3.lane("moe.k3").suffix_rule.suffix == "_situ_as_silu"


def test_find_by_stem_or_hf_id():
    assert find_spec("kimi-k3").model == find_spec("moonshotai/Kimi-K3").model
    with pytest.raises(LaneSpecError, match="no lane spec for model 'nope/nope'"):
        find_spec("nope/nope")


def mutate(tmp_path: Path, change) -> Path:
    raw = yaml.safe_load(K3.read_text())
    change(raw)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize(("change", "message"), [
    (lambda r: r["lanes"][1]["filter"].update(hidden_sz=3584),
     r"bad.yaml: lanes\[1\].filter.hidden_sz: column 'hidden_sz' does not exist in table moe_perf"),
    (lambda r: r["lanes"][0].update(table="kda_prf"), r"bad.yaml: lanes\[0\].table: 'kda_prf' is not a table"),
    (lambda r: r["lanes"][0]["expect"][0].update(version=0.5), r"bad.yaml: lanes\[0\].expect\[0\].version: expected str"),
    (lambda r: r["lanes"][2]["expect"][0].update(systems=["mi300x"]), r"bad.yaml: lanes\[2\].expect\[0\].systems: \['mi300x'\]"),
    (lambda r: r.pop("architecture"), r"bad.yaml: top.architecture: required key missing"),
    (lambda r: r["lanes"].append(dict(r["lanes"][0])), r"bad.yaml: lanes: duplicate lane id\(s\) \['kda'\]"),
    (lambda r: r["lanes"][1].update(dtype_column="moe_dtyp"), r"bad.yaml: lanes\[1\].dtype_column: column 'moe_dtyp'"),
    (lambda r: r["lanes"][0]["claims"][0].update(rows="many"), r"bad.yaml: lanes\[0\].claims\[0\].rows: expected int"),
])
def test_bad_spec_names_file_and_key(tmp_path, change, message):
    with pytest.raises(LaneSpecError, match=message):
        load_spec(mutate(tmp_path, change))


def test_not_yaml(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("model: [unclosed\n")
    with pytest.raises(LaneSpecError, match="broken.yaml: not valid YAML"):
        load_spec(path)
