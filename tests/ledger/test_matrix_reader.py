"""Support-matrix CSV import: real states, legacy headers, and every kind of bad input."""

import csv
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfledger.ledger.matrix.reader import MatrixFormatError, read_matrix
from perfledger.ledger.matrix.rules import load_rules
from tests.ledger.curated import MATRIX_STATES, wheel_systems

RULES = load_rules()
ROW = ["moonshotai/Kimi-K3", "KimiK3ForConditionalGeneration", "b200_sxm", "sglang", "0.5.16", "agg", "PASS", "",
       "uv run aiconfigurator cli default --database-mode SILICON", "silicon"]


def write(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


@pytest.mark.parametrize(("state", "rows", "kimi"), [("head-095f58a", 14408, 236), ("k3-merge-a77804e", 13032, 228)])
def test_real_states(state, rows, kimi):
    frame = read_matrix(MATRIX_STATES / state)
    assert frame.height == rows
    assert frame.filter(frame["HuggingFaceID"] == "moonshotai/Kimi-K3").height == kimi
    assert set(frame["Status"].unique()) <= set(RULES.statuses)


def test_head_status_counts_match_reference():
    counts = dict(read_matrix(MATRIX_STATES / "head-095f58a").group_by("Status").len().iter_rows())
    assert counts == {"PASS": 7367, "HYBRID_PASS": 1156, "FAIL": 2955, "HW_INCOMPATIBLE": 2434,
                      "FRAMEWORK_INCOMPATIBLE": 496}


def test_wheel_matrix():
    frame = read_matrix(wheel_systems() / "support_matrix")
    assert frame.height > 0
    assert frame["System"].n_unique() == len(list((wheel_systems() / "support_matrix").glob("*.csv")))


def test_index_order_is_kept():
    frame = read_matrix(MATRIX_STATES / "head-095f58a")
    assert frame["source_file"].unique(maintain_order=True).to_list()[:3] == ["b200_sxm.csv", "gb200.csv", "b300_sxm.csv"]


@pytest.mark.parametrize("width", [8, 9])
def test_legacy_headers_are_upgraded(tmp_path, width):
    rows = [ROW[:width], [*ROW[:6], "FAIL", "Traceback ...", *ROW[8:width]]]
    rows[1][5] = "disagg"
    frame = read_matrix(write(tmp_path / "b200_sxm.csv", list(RULES.columns[:width]), rows))
    assert frame.columns[:10] == list(RULES.columns)
    assert frame["Source"].to_list() == ["silicon", ""]
    assert (frame["Command"].null_count() == 2) == (width == 8)


def test_legacy_hybrid_pass_is_rejected(tmp_path):
    row = [*ROW[:6], "HYBRID_PASS", "", "cmd"]
    path = write(tmp_path / "b200_sxm.csv", list(RULES.columns[:9]), [row])
    with pytest.raises(MatrixFormatError, match=r"b200_sxm.csv:2: column Source"):
        read_matrix(path)


def test_duplicate_key_names_file_and_both_lines(tmp_path):
    other = [*ROW[:5], "disagg", *ROW[6:]]
    path = write(tmp_path / "b200_sxm.csv", list(RULES.columns), [ROW, other, [*ROW[:6], "FAIL", "x", "c", ""]])
    with pytest.raises(MatrixFormatError, match=r"b200_sxm.csv:4: duplicate key .*first at b200_sxm.csv:2"):
        read_matrix(path)


def test_unknown_status(tmp_path):
    path = write(tmp_path / "b200_sxm.csv", list(RULES.columns), [ROW, [*ROW[:5], "disagg", "MAYBE", *ROW[7:]]])
    with pytest.raises(MatrixFormatError, match=r"b200_sxm.csv:3: column Status: unknown status 'MAYBE'"):
        read_matrix(path)


def test_unknown_mode(tmp_path):
    path = write(tmp_path / "b200_sxm.csv", list(RULES.columns), [[*ROW[:5], "both", *ROW[6:]]])
    with pytest.raises(MatrixFormatError, match=r"column Mode"):
        read_matrix(path)


def test_wrong_field_count(tmp_path):
    path = write(tmp_path / "b200_sxm.csv", list(RULES.columns), [ROW, ROW[:7]])
    with pytest.raises(MatrixFormatError, match=r"b200_sxm.csv:3: expected 10 fields, found 7"):
        read_matrix(path)


def test_unknown_header(tmp_path):
    path = write(tmp_path / "b200_sxm.csv", ["Model", *RULES.columns[1:]], [ROW])
    with pytest.raises(MatrixFormatError, match=r"b200_sxm.csv:1: header"):
        read_matrix(path)


def test_system_must_match_file_stem(tmp_path):
    (tmp_path / "m").mkdir()
    write(tmp_path / "m" / "gb200.csv", list(RULES.columns), [ROW])
    with pytest.raises(MatrixFormatError, match=r"gb200.csv:2: column System"):
        read_matrix(tmp_path / "m")


def test_empty_and_missing(tmp_path):
    with pytest.raises(MatrixFormatError, match="no data rows"):
        read_matrix(write(tmp_path / "b200_sxm.csv", list(RULES.columns), []))
    with pytest.raises(MatrixFormatError, match="no such"):
        read_matrix(tmp_path / "nope")


text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r"), max_size=30)


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(text, text, st.sampled_from(RULES.statuses), text), min_size=1, max_size=8,
                     unique_by=lambda r: r[0]))
def test_roundtrip_any_text(tmp_path_factory, rows):
    """Quoted commas, quotes and newlines inside fields survive; line numbers point at each record's start."""
    body = [[hf, "Arch", "b200_sxm", "vllm", "0.24.0", "agg", status, err, cmd,
             "silicon" if status == "PASS" else ("xshape" if status == "HYBRID_PASS" else "")]
            for hf, cmd, status, err in rows]
    path = write(tmp_path_factory.mktemp("m") / "b200_sxm.csv", list(RULES.columns), body)
    frame = read_matrix(path)
    assert frame.select(RULES.columns).rows() == [tuple(r) for r in body]
    with path.open(newline="") as fh:
        lines = [line + "\n" for line in fh.read().split("\n")]
    for line_no, expected in zip(frame["source_line"], body, strict=True):
        assert next(csv.reader(lines[line_no - 1:])) == expected
