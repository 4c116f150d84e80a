"""Hostile support-matrix input: every bad folder, CSV or index.json is one clear line naming
file[:line[:column]], `matrix import` exits 1, and the warehouse is left as it was."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.ledger.matrix.reader import MAX_FIELD_CHARS, MatrixFormatError, read_matrix
from perfledger.ledger.matrix.rules import load_rules
from perfledger.ledger.source import MATRIX_TABLE
from perfledger.warehouse.store import Warehouse
from tests.ledger.curated import MATRIX_STATES

HEAD = MATRIX_STATES / "head-095f58a"
RULES = load_rules()
HEADER = ",".join(RULES.columns)
ROW = "moonshotai/Kimi-K3,KimiK3ForConditionalGeneration,b200_sxm,sglang,0.5.16,agg,PASS,,cmd,silicon"


def matrix_folder(root: Path, csv_text: str | bytes, index: str | bytes | None = '{"files": ["b200_sxm.csv"]}') -> Path:
    root.mkdir(parents=True, exist_ok=True)
    data = csv_text.encode() if isinstance(csv_text, str) else csv_text
    (root / "b200_sxm.csv").write_bytes(data)
    if index is not None:
        (root / "index.json").write_bytes(index.encode() if isinstance(index, str) else index)
    return root


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """A warehouse holding one imported snapshot (label `before`)."""
    root = tmp_path / "wh"
    good = matrix_folder(tmp_path / "good", f"{HEADER}\n{ROW}\n")
    result = CliRunner().invoke(app, ["matrix", "import", str(good), "--label", "before", "--warehouse", str(root)])
    assert result.exit_code == 0, result.output
    return root


def import_fails(folder: Path, warehouse: Path, message: str) -> str:
    """`matrix import` of `folder` exits 1 with one line matching `message`; the warehouse is unchanged."""
    before = Warehouse(warehouse).table_version(MATRIX_TABLE)
    result = CliRunner().invoke(app, ["matrix", "import", str(folder), "--label", "after", "--warehouse", str(warehouse)])
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert message in lines[0], lines[0]
    assert Warehouse(warehouse).table_version(MATRIX_TABLE) == before
    return lines[0]


@pytest.mark.parametrize(("csv_text", "index", "message"), [
    (HEADER.encode() + b"\n" + ROW.replace("Kimi-K3,", "Kimi-K\xe9,").encode("latin-1") + b"\n", None,
     "b200_sxm.csv:2:18: not UTF-8 text (byte 0xe9)"),
    (f"{HEADER}\n{ROW}\n", '{"files": ', "index.json: not valid JSON (line 1, column 11"),
    (f"{HEADER}\n{ROW}\n", '["b200_sxm.csv"]', 'index.json: expected {"files": [<CSV names>]}'),
    (f"{HEADER}\n{ROW}\n", '{"files": "b200_sxm.csv"}', 'index.json: expected {"files": [<CSV names>]}'),
    (f"{HEADER}\n{ROW}\n", '{"files": [["b200_sxm.csv"]]}', 'index.json: expected {"files": [<CSV names>]}'),
    (f"{HEADER}\n{ROW}\n", '{"files": ["b200_sxm.csv", "gb200.csv"]}', "index.json: lists ['gb200.csv'], not in"),
    (f"{HEADER}\n{ROW}\n", b"\xff\xfe{}", "index.json:1:1: not UTF-8 text"),
    (f"{HEADER}\n{ROW}\n", "[" * 100 + "]" * 100, "index.json: nested deeper than 64 levels"),
    (f"{HEADER}\n{ROW.replace(',cmd,', ',' + 'x' * 10_000_000 + ',')}\n", None,
     f"b200_sxm.csv:2: a field over the {MAX_FIELD_CHARS:,}-character limit"),
    (f"{HEADER}\n{ROW.replace(',cmd,', ',' + 'x' * (MAX_FIELD_CHARS + 1) + ',')}\n", None,
     f"b200_sxm.csv:2: field 9 has {MAX_FIELD_CHARS + 1:,} characters, over the {MAX_FIELD_CHARS:,} limit"),
    (f"{HEADER}\n{ROW}\n{ROW.replace(',PASS,', ',' + 'Q' * 60_000 + ',')}\n", None,
     "b200_sxm.csv:3: column Status: unknown status 'QQQ"),
    (f'{HEADER}\n{ROW}\n"unterminated,{ROW}\n', None, "b200_sxm.csv:3: "),
    (f"{HEADER}\r{ROW}\r", None, None),
    ("\ufeff" + f"{HEADER}\r\n{ROW}\r\n", None, None),
], ids=["non-utf8-csv", "bad-json", "index-list", "files-not-list", "files-nested", "index-names-absent",
        "non-utf8-index", "deep-index", "10mb-field", "long-field", "huge-status", "open-quote", "cr-only", "bom-crlf"])
def test_bad_matrix_input_is_one_clear_line(tmp_path, warehouse, csv_text, index, message) -> None:
    folder = matrix_folder(tmp_path / "m", csv_text, index if index is not None else '{"files": ["b200_sxm.csv"]}')
    if message is None:  # line ends and a byte-order mark are read alike
        assert read_matrix(folder).height == 1
        return
    line = import_fails(folder, warehouse, message)
    assert len(line) < 1000  # quoted input is cut, never megabytes


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: os.mkfifo(p), "a FIFO, not a regular file"),
    (lambda p: p.mkdir(), "a folder, not a regular file"),
    (lambda p: p.symlink_to("/dev/zero"), "leaves the source"),
    (lambda p: p.symlink_to(p.parent.parent / "outside.csv"), "leaves the source"),
])
def test_only_regular_files_inside_the_folder_are_read(tmp_path, warehouse, make, message) -> None:
    folder = matrix_folder(tmp_path / "m", f"{HEADER}\n{ROW}\n")
    (tmp_path / "outside.csv").write_text(f"{HEADER}\n{ROW.replace('b200_sxm', 'gb200')}\n")
    make(folder / "gb200.csv")
    import_fails(folder, warehouse, f"gb200.csv: {message}" if "leaves" not in message else message)


def test_a_fifo_index_is_refused_without_blocking(tmp_path, warehouse) -> None:
    folder = matrix_folder(tmp_path / "m", f"{HEADER}\n{ROW}\n", index=None)
    os.mkfifo(folder / "index.json")
    import_fails(folder, warehouse, "index.json: a FIFO, not a regular file")


def test_a_real_matrix_with_one_corrupted_file(tmp_path, warehouse) -> None:
    folder = Path(shutil.copytree(HEAD, tmp_path / "head", copy_function=shutil.copyfile))
    target = folder / "h200_sxm.csv"
    lines = target.read_bytes().split(b"\n")
    at = lines[41].index(b",") + 1  # the first byte of the second field on line 42
    lines[41] = lines[41][:at] + b"\x96" + lines[41][at:]
    target.write_bytes(b"\n".join(lines))
    import_fails(folder, warehouse, f"h200_sxm.csv:42:{at + 1}: not UTF-8 text (byte 0x96)")
    (folder / "index.json").write_text(json.dumps({"files": ["h200_sxm.csv", "h200_sxm.csv", "b200_sxm.csv"]}))
    target.write_bytes(b"\n".join([*lines[:41], lines[40]]))  # line 42 repeats line 41
    import_fails(folder, warehouse, "h200_sxm.csv:42: duplicate key")


any_line = st.one_of(st.just(HEADER), st.just(ROW), st.text(max_size=40),
                     st.builds(lambda row, i, s: ",".join(row.split(",")[:i] + [s] + row.split(",")[i + 1:]),
                               st.just(ROW), st.integers(0, 9), st.text(max_size=12)))
csv_bytes = st.one_of(
    st.builds(lambda lines, end: end.join(lines).encode(), st.lists(any_line, max_size=6),
              st.sampled_from(["\n", "\r\n", "\r"])),
    st.binary(max_size=120),
)
index_bytes = st.one_of(
    st.none(), st.binary(max_size=40),
    st.recursive(st.none() | st.booleans() | st.integers() | st.sampled_from(["b200_sxm.csv", "gb200.csv", "files"]),
                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["files", "x"]), inner,
                                                                             max_size=2),
                 max_leaves=6).map(lambda v: json.dumps(v).encode()),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=csv_bytes, index=index_bytes)
def test_any_matrix_folder_is_read_or_refused_with_one_clear_line(tmp_path_factory, data, index) -> None:
    folder = tmp_path_factory.mktemp("matrix")
    (folder / "b200_sxm.csv").write_bytes(data)
    if index is not None:
        (folder / "index.json").write_bytes(index)
    try:
        frame = read_matrix(folder)
    except MatrixFormatError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(str(folder)), message
    else:
        assert frame.height >= 1 and set(frame["Status"]) <= set(RULES.statuses)
