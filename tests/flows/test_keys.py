"""Content keys and the stage cache: same inputs skip, changed inputs or a damaged cache recompute."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from perfledger.flows.keys import StageCache, content_key, file_digest


@given(st.lists(st.integers() | st.text(), max_size=5), st.lists(st.integers() | st.text(), max_size=5))
def test_content_key_is_equal_exactly_for_equal_parts(a: list, b: list) -> None:
    assert (content_key("s", a) == content_key("s", b)) == (a == b)
    assert content_key("s", a) != content_key("t", a)


def test_file_digest_follows_content(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.yaml").write_text("a: 1\n")
    before = file_digest(tmp_path / "d")
    assert file_digest(tmp_path / "d") == before
    (tmp_path / "d" / "x.yaml").write_text("a: 2\n")
    assert file_digest(tmp_path / "d") != before
    assert file_digest(tmp_path / "absent") == "missing"


def test_stage_cache_skips_on_same_key_and_survives_damage(tmp_path: Path) -> None:
    calls = []
    compute = lambda: calls.append(1) or {"n": len(calls)}  # noqa: E731
    assert StageCache(tmp_path).run("ledger", "k1", compute) == ({"n": 1}, False)
    assert StageCache(tmp_path).run("ledger", "k1", compute) == ({"n": 1}, True)
    assert StageCache(tmp_path).run("ledger", "k2", compute) == ({"n": 2}, False)
    (tmp_path / ".pipeline" / "stages.json").write_text("{not json")
    assert StageCache(tmp_path).run("ledger", "k2", compute) == ({"n": 3}, False)
