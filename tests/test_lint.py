"""The tree stays ruff-clean: every rule pyproject.toml selects, over the whole repository.

Runs the venv's ruff (installed by the `test` extra), so `make test` fails on the first new violation.
Only `ruff check`: the code is wrapped by hand, never reformatted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_tree_is_ruff_clean() -> None:
    ruff = Path(sys.executable).with_name("ruff")
    proc = subprocess.run([str(ruff), "check", "--no-cache", "--output-format", "concise", "."],
                          cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"ruff check found violations:\n{proc.stdout}{proc.stderr}", pytrace=False)
