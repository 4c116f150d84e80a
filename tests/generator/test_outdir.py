"""Re-generating into a used --out folder: stale generated files go, other files stay, warnings say so."""

import json

import pytest

from perfledger.generator.api import generate
from perfledger.generator.errors import GeneratorError
from perfledger.generator.outdir import MANIFEST

from .conftest import EXAMPLES


def _tree(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_regenerating_removes_only_stale_generated_files(tmp_path):
    first = generate(EXAMPLES / "vllm_disagg.yaml", [], tmp_path, target="llm-d-kustomize")
    assert "kustomize/prefill.yaml" in _tree(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    second = generate(EXAMPLES / "vllm_agg.yaml", [], tmp_path)
    expected = sorted([str(p.relative_to(tmp_path)) for p in second.files] + ["notes.txt", MANIFEST])
    assert _tree(tmp_path) == expected
    assert not (tmp_path / "kustomize").exists(), "emptied generated sub-folder is removed"
    stale = sorted({str(p.relative_to(tmp_path)) for p in first.files} - {str(p.relative_to(tmp_path)) for p in second.files})
    removed = [w for w in second.warnings if "removed stale" in w]
    assert stale and len(removed) == len(stale) and all(any(f" {n} " in w for w in removed) for n in stale)
    assert json.loads((tmp_path / MANIFEST).read_text())["files"] == sorted(
        str(p.relative_to(tmp_path)) for p in second.files)


def test_same_generation_twice_removes_nothing(tmp_path):
    generate(EXAMPLES / "sglang_disagg.yaml", [], tmp_path)
    again = generate(EXAMPLES / "sglang_disagg.yaml", [], tmp_path)
    assert not any("stale" in w for w in again.warnings)


def test_files_without_a_manifest_are_never_removed(tmp_path):
    (tmp_path / "run_7.sh").write_text("# someone else's\n")
    generate(EXAMPLES / "vllm_agg.yaml", [], tmp_path)
    assert (tmp_path / "run_7.sh").read_text() == "# someone else's\n"


@pytest.mark.parametrize("content, fragment", [
    ("{not json", "unreadable manifest"),
    ('{"format": "other", "files": []}', "expected"),
    ('{"format": "perfledger-generator-manifest/1", "files": ["../../etc/passwd"]}', "escapes the output folder"),
    ('{"format": "perfledger-generator-manifest/1", "files": ["/etc/passwd"]}', "escapes the output folder"),
])
def test_bad_manifest_fails_naming_it_and_deletes_nothing(tmp_path, content, fragment):
    (tmp_path / MANIFEST).write_text(content)
    (tmp_path / "keep.sh").write_text("x")
    with pytest.raises(GeneratorError, match=fragment) as info:
        generate(EXAMPLES / "vllm_agg.yaml", [], tmp_path)
    assert MANIFEST in info.value.where
    assert _tree(tmp_path) == sorted([MANIFEST, "keep.sh"])


def test_stale_entry_that_is_no_longer_a_plain_file_is_left_with_a_warning(tmp_path):
    generate(EXAMPLES / "sglang_disagg.yaml", [], tmp_path)
    (tmp_path / "run_2.sh").unlink()
    (tmp_path / "run_2.sh").mkdir()
    out = generate(EXAMPLES / "sglang_agg.yaml", [], tmp_path)
    assert (tmp_path / "run_2.sh").is_dir()
    assert any("run_2.sh was generated earlier but is no longer a plain file" in w for w in out.warnings)


def test_stale_names_behind_a_symlinked_folder_are_not_followed(tmp_path):
    out, outside = tmp_path / "out", tmp_path / "outside"
    generate(EXAMPLES / "vllm_agg.yaml", [], out, target="llm-d-kustomize")
    outside.mkdir()
    (outside / "decode.yaml").write_text("not yours")
    for f in (out / "kustomize").iterdir():
        f.unlink()
    (out / "kustomize").rmdir()
    (out / "kustomize").symlink_to(outside)
    result = generate(EXAMPLES / "vllm_agg.yaml", [], out)
    assert (outside / "decode.yaml").read_text() == "not yours"
    assert any("kustomize/decode.yaml was generated earlier but is no longer a plain file" in w for w in result.warnings)
