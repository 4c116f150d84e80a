"""The import graph: no cycle between the project's files, and the layer contracts in pyproject.toml hold.

grimp (and import-linter, built on it) finds a package's modules by walking the folder its import name
resolves to, and the stage folders only join `perfledger/` once installed (`package-dir`). So both run in
a subprocess over the installed layout: a folder whose `perfledger/` links perfledger's own files and
every stage folder, under the names they install as. Function-level (lazy) and TYPE_CHECKING imports
count: each is an edge between two files all the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PACKAGE_DIR: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]
CONTRACTS: list[dict] = PYPROJECT["tool"]["importlinter"]["contracts"]

# importer -> {imported: [line numbers]} for every module grimp finds under `perfledger`.
GRAPH_DUMP = """
import json, grimp
graph = grimp.build_graph("perfledger", cache_dir=None)
print(json.dumps({importer: {imported: sorted(d["line_number"] for d in graph.get_import_details(
    importer=importer, imported=imported)) for imported in graph.find_modules_directly_imported_by(importer)}
    for importer in graph.modules}))
"""


@pytest.fixture(scope="module")
def installed_layout(tmp_path_factory) -> Path:
    """A folder where `import perfledger` sees every stage as installed (links to the tree, nothing copied)."""
    root = tmp_path_factory.mktemp("layout")
    for name, folder in sorted(PACKAGE_DIR.items()):
        target = root.joinpath(*name.split("."))
        if name == "perfledger":
            target.mkdir()
            for source in (REPO / folder).iterdir():
                if source.name != "__pycache__":
                    (target / source.name).symlink_to(source)
        else:
            target.symlink_to(REPO / folder, target_is_directory=True)
    return root


def _run_in(layout: Path, command: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(layout)}
    return subprocess.run(command, cwd=layout, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def imports(installed_layout) -> dict[str, dict[str, list[int]]]:
    proc = _run_in(installed_layout, [sys.executable, "-c", GRAPH_DUMP])
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _tree_modules() -> set[str]:
    """Every module of the tree under its installed name (folders without __init__.py hold package data)."""
    found = set()
    for name, folder in PACKAGE_DIR.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            if all((REPO / folder).joinpath(*parts[:i], "__init__.py").is_file() for i in range(len(parts))):
                found.add(".".join([name, *(parts[:-1] if parts[-1] == "__init__" else parts)]))
    return found


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of a directed graph, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in edges.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return components


def test_the_graph_covers_every_module_of_the_tree(imports):
    assert set(imports) == _tree_modules()


def test_strongly_connected_finds_each_cycle_and_self_import():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d", "a"}, "e": set()}
    assert sorted(strongly_connected(edges)) == [["a", "b", "c"], ["d"], ["e"]]


def test_no_import_cycle_between_files(imports):
    edges = {importer: set(imported) for importer, imported in imports.items()}
    cycles = [c for c in strongly_connected(edges) if len(c) > 1 or c[0] in edges[c[0]]]
    report = []
    for cycle in cycles:
        report.append(f"cycle of {len(cycle)} module(s): {', '.join(cycle)}")
        report += [f"    {importer} -> {imported} (line {', '.join(map(str, imports[importer][imported]))})"
                   for importer in cycle for imported in sorted(edges[importer] & set(cycle))]
    assert not cycles, "import cycles (move the shared piece to the module that owns it):\n" + "\n".join(report)


@pytest.mark.parametrize("contract", [c["id"] for c in CONTRACTS])
def test_import_contract_holds(installed_layout, contract):
    lint_imports = Path(sys.executable).with_name("lint-imports")
    proc = _run_in(installed_layout, [str(lint_imports), str(REPO / "pyproject.toml"), "--no-cache", "--no-logo",
                                      "--contract", contract])
    assert proc.returncode == 0, proc.stdout + proc.stderr
