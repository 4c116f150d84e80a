"""One model naming (schemas/model_names.py): HF id in any case, lane-spec name, config path; unknown -> close matches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfledger.schemas.model_names import UnknownModel, config_models, lane_models, resolve_model_name

pytestmark = pytest.mark.aic  # the HF ids of the installed wheel's model configs


def test_lane_name_hf_id_and_case_all_mean_kimi_k3():
    for name in ("kimi-k3", "moonshotai/Kimi-K3", "moonshotai/kimi-k3", "KIMI-K3", " kimi-k3 "):
        ref = resolve_model_name(name)
        assert (ref.hf_id, ref.lane, ref.config_path) == ("moonshotai/Kimi-K3", "kimi-k3", None), name


def test_a_model_config_without_lane_spec_resolves_to_its_hf_id():
    ref = resolve_model_name("qwen/qwen3-32b")
    assert (ref.hf_id, ref.lane) == ("Qwen/Qwen3-32B", None)


def test_a_config_path_or_folder(tmp_path: Path, shared_tree):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"_name_or_path": "moonshotai/Kimi-K3", "hidden_size": 7168}))
    by_folder, by_file = resolve_model_name(str(folder)), resolve_model_name(str(folder / "config.json"))
    assert by_folder == resolve_model_name(str(folder)) and by_folder.config_path == by_file.config_path
    assert (by_file.hf_id, by_file.lane) == ("moonshotai/Kimi-K3", "kimi-k3")
    named = shared_tree.parents[2] / "model_configs" / "Qwen--Qwen3-32B_config.json"  # the Org--Name layout
    assert resolve_model_name(str(named)).hf_id == "Qwen/Qwen3-32B"


def test_bad_paths_are_one_line_naming_the_path(tmp_path: Path):
    with pytest.raises(UnknownModel, match="holds no config.json"):
        resolve_model_name(str(tmp_path))
    with pytest.raises(UnknownModel, match="nope.json: does not exist"):
        resolve_model_name(str(tmp_path / "nope.json"))


def test_unknown_names_list_close_matches():
    with pytest.raises(UnknownModel, match=r"did you mean: .*kimi-k3") as err:
        resolve_model_name("kimi-k4")
    assert "\n" not in str(err.value)
    with pytest.raises(UnknownModel, match="did you mean: Qwen/Qwen3"):
        resolve_model_name("qwen3-32")
    with pytest.raises(UnknownModel, match="known: "):
        resolve_model_name("zzzzzzzz/zzzzzzzzzz")


def test_also_names_models_only_a_snapshot_knows():
    assert resolve_model_name("acme/Private-7B", also=["acme/Private-7B"]).hf_id == "acme/Private-7B"
    with pytest.raises(UnknownModel):
        resolve_model_name("acme/Private-7B")


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_every_known_name_in_any_case_resolves_to_itself(data):
    known = sorted({*lane_models().values(), *config_models()})
    hf_id = data.draw(st.sampled_from(known))
    flipped = "".join(c.swapcase() if data.draw(st.booleans()) else c for c in hf_id)
    folded = [k for k in known if k.lower() == hf_id.lower()]
    if len(folded) == 1:
        assert resolve_model_name(flipped).hf_id == hf_id


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40),
                 st.text(alphabet="/.~-_aAkK3\x00", max_size=12)))
def test_any_text_resolves_or_is_an_unknown_model(name):
    try:
        ref = resolve_model_name(name)
    except UnknownModel as exc:
        assert str(exc)
    else:
        assert ref.hf_id or ref.config_path
