"""Each stage page in docs/ has a module table that matches the tree: every module of the stage is listed,
and every module the table names exists. (Tables name modules relative to the page's stage folder, or with
the folder in front.)"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = {
    "estimator.md": ("estimator",),
    "ledger.md": ("ledger",),
    "operations.md": ("flows", "perfledger"),
    "reports.md": ("reports",),
    "warehouse.md": ("warehouse", "schemas"),
    "generator.md": ("generator",),
    "collector.md": ("collector",),
}
MODULE = re.compile(r"`([A-Za-z0-9_./{},]+\.py)`")


def _expand(token: str) -> list[str]:
    """`a/{b,c}.py` → a/b.py, a/c.py (the tables' shorthand for sibling modules)."""
    braces = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", token)
    if not braces:
        return [token]
    return [f"{braces[1]}{part}{braces[3]}" for part in braces[2].split(",")]


def named_modules(page: Path, folders: tuple[str, ...]) -> set[str]:
    """Repository-relative paths of the modules named in the first cell of the rows of the page's module
    tables (tables whose header's first cell is `module`)."""
    named, in_module_table = set(), False
    for line in page.read_text().splitlines():
        if not line.startswith("|"):
            in_module_table = False
            continue
        first_cell = line.split("|")[1].strip()
        if first_cell == "module":
            in_module_table = True
        if not in_module_table:
            continue
        for token in (t for found in MODULE.findall(first_cell) for t in _expand(found)):
            top = token.split("/", 1)[0]
            named.add(token if top in PAGES_FOLDERS else f"{folders[0]}/{token}")
    return named


PAGES_FOLDERS = {folder for folders in PAGES.values() for folder in folders}


def tree_modules(folders: tuple[str, ...]) -> set[str]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", *(f"{f}/*.py" for f in folders)],
                            cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    return {p for p in listed if Path(p).name != "__init__.py" and (REPO / p).is_file()}


@pytest.mark.parametrize("page", sorted(PAGES))
def test_module_table_matches_the_tree(page):
    named, tree = named_modules(REPO / "docs" / page, PAGES[page]), tree_modules(PAGES[page])
    absent = sorted(p for p in named if not (REPO / p).is_file())
    assert {"missing from the table": sorted(tree - named), "named but absent": absent} == {
        "missing from the table": [], "named but absent": []}


def test_brace_shorthand_expands_each_sibling():
    assert _expand("matrix/{reader,store}.py") == ["matrix/reader.py", "matrix/store.py"]
