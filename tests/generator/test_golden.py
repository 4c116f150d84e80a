"""Golden snapshots per backend x mode x target. Update on purpose only: PERFLEDGER_UPDATE_GOLDEN=1."""

import os
import shutil

import pytest

from .conftest import COMBOS, GOLDEN, example, render

UPDATE = os.environ.get("PERFLEDGER_UPDATE_GOLDEN") == "1"
CASES = COMBOS


def test_cases_cover_every_backend_mode_and_target():
    covered = {(name.split("_")[0], name.split("_")[1], target) for name, target in CASES}
    assert {(b, m) for b, m, _ in covered} == {(b, m) for b in ("vllm", "sglang", "trtllm") for m in ("agg", "disagg")}
    assert {t for _, _, t in covered} == {"dynamo", "llm-d-helm", "llm-d-kustomize"}
    names = {name for name, _ in CASES}
    assert {"vllm_disagg_multinode", "sglang_agg_multinode", "vllm_agg_encode", "trtllm_disagg_encode"} <= names


def test_no_orphan_golden_folders():
    """A removed or renamed example must not leave a snapshot nobody checks."""
    assert sorted(p.name for p in GOLDEN.iterdir() if p.is_dir()) == sorted(f"{n}-{t}" for n, t in CASES)


@pytest.mark.parametrize("name, target", CASES)
def test_golden(name, target):
    files = render(example(name), target=target).files
    folder = GOLDEN / f"{name}-{target}"
    if UPDATE:
        shutil.rmtree(folder, ignore_errors=True)
        for rel, text in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text, encoding="utf-8")
    if not folder.is_dir():
        pytest.fail(f"no golden files in {folder}; run with PERFLEDGER_UPDATE_GOLDEN=1 and review the diff")
    stored = {str(p.relative_to(folder)): p.read_text(encoding="utf-8") for p in folder.rglob("*") if p.is_file()}
    assert sorted(stored) == sorted(files), "artifact list changed (PERFLEDGER_UPDATE_GOLDEN=1 to accept)"
    for rel, text in files.items():
        assert text == stored[rel], f"{folder.name}/{rel} differs (PERFLEDGER_UPDATE_GOLDEN=1 to accept)"
