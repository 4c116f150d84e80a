"""One import name: the stage folders install as `perfledger.<stage>`, nothing else lands top level.

The package list in pyproject.toml is explicit (the folders sit at the repository root, mapped by
`package-dir`), so these tests keep it in step with the tree, prove no bare stage module is importable
or imported, check what a built wheel really holds, and run the installed wheel away from any checkout.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
PACKAGE_DIR: dict[str, str] = SETUPTOOLS["package-dir"]
STAGES = sorted(name.split(".", 1)[1] for name in PACKAGE_DIR if name != "perfledger")
PROJECT_SOURCES = ("perfledger", *STAGES, "tests", "benchmarks")


def _tracked(*pathspec: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", *pathspec], cwd=REPO, capture_output=True, text=True, check=True)
    return [REPO / line for line in out.stdout.splitlines()]


def _packages_in_tree() -> set[str]:
    found = set()
    for name, folder in PACKAGE_DIR.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            found.add(".".join([name, *rel.parts]))
    return found


def test_package_list_matches_the_tree():
    assert set(SETUPTOOLS["packages"]) == _packages_in_tree()


def test_every_stage_folder_is_mapped():
    folders = {p.parent.name for p in REPO.glob("*/__init__.py")} - {"tests"}
    assert folders == {*STAGES, "perfledger"}


def test_no_bare_stage_module_is_importable():
    """Outside the checkout (an empty cwd, no PYTHONPATH) only `perfledger.*` resolves."""
    probe = ("import importlib.util, json, sys; "
             f"print(json.dumps({{n: importlib.util.find_spec(n) is not None for n in {STAGES!r}}}))")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(REPO / "var")}
    out = subprocess.run([sys.executable, "-c", probe], cwd="/", env=env, capture_output=True, text=True, check=True)
    assert "true" not in out.stdout, out.stdout


def _bare_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    bad = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        bad += [f"{path.relative_to(REPO)}:{node.lineno} {n}" for n in names if n.split(".")[0] in STAGES]
    return bad


def test_no_source_imports_a_bare_stage_module():
    files = [p for p in _tracked(*(f"{d}/*.py" for d in PROJECT_SOURCES))]
    assert files
    bad = [hit for path in files for hit in _bare_imports(path)]
    assert not bad, bad


def test_importing_every_module_loads_no_bare_stage():
    import importlib
    import pkgutil

    import perfledger

    skip = {"perfledger.collector.backends.torch_cuda"}  # needs torch, not a dependency
    for info in pkgutil.walk_packages(perfledger.__path__, "perfledger."):
        if info.name not in skip:
            importlib.import_module(info.name)
    assert not [name for name in sys.modules if name.split(".")[0] in STAGES]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from a copy of the working tree: setuptools writes build/ and *.egg-info beside the sources."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    for rel in listed:
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(src)], check=True, capture_output=True, text=True)
    return next(out.glob("perfledger-*.whl"))


@pytest.mark.xdist_group("wheel")  # one wheel build per run
def test_wheel_has_one_top_level_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"perfledger"}


@pytest.mark.xdist_group("wheel")  # one wheel build per run
def test_wheel_ships_every_tracked_file_of_the_packages(wheel):
    """Code and package data (catalogs, lane specs, templates, rules, default configs)."""
    inside = set(zipfile.ZipFile(wheel).namelist())
    expected = set()
    for name, folder in PACKAGE_DIR.items():
        for path in _tracked(f"{folder}/"):
            expected.add("/".join([*name.split("."), *path.relative_to(REPO / folder).parts]))
    assert expected - inside == set()


def _written_since(start: float) -> list[str]:
    """Files of the checkout changed since `start`, beside what a concurrent test run writes there itself."""
    busy = {".git", ".venv", "__pycache__", ".hypothesis", "prefect-tests"}
    changed = []
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in busy]
        changed += [str(Path(folder, f).relative_to(REPO)) for f in files if Path(folder, f).stat().st_mtime >= start]
    return changed


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed non-editably; its dependencies are the dev venv's, on sys.path
    through a plain .pth line (the dev venv's own .pth files, its editable finder included, do not run)."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "dev-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
                   check=True, capture_output=True, text=True)
    return venv


@pytest.mark.xdist_group("wheel")  # one wheel build per run
def test_installed_wheel_runs_from_an_empty_folder(installed, tmp_path, aic_core):
    """`perfledger estimate static` and `perfledger run` on a small config work outside the checkout: no
    reference data, no PERFLEDGER_*/PREFECT_HOME, package data only; outputs land where asked, the repo is untouched."""
    data = Path(aic_core.__file__).parent / "systems" / "data"
    version = sorted(p.name for p in (data / "h200_sxm" / "gemm" / "vllm").iterdir())[0]
    cwd, home = tmp_path / "empty", tmp_path / "home"
    cwd.mkdir(), home.mkdir()
    env = {"PATH": f"{installed / 'bin'}:/usr/bin:/bin", "HOME": str(home), "PREFECT_LOGGING_LEVEL": "WARNING"}
    config = tmp_path / "cfg" / "pipeline.yaml"
    config.parent.mkdir()
    config.write_text(f"sources: ['{data / 'b200_sxm' / 'kda'}']\nmodels: [kimi-k3]\n"
                      "deployments: [package://perfledger.generator/examples/vllm_agg.yaml]\n")
    start = time.time()

    where = subprocess.run(["python", "-c", "import perfledger; print(perfledger.__file__)"], cwd=cwd, env=env,
                           capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(installed))
    static = subprocess.run(["perfledger", "estimate", "static", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm",
                             "--backend", "vllm", "--version", version, "--batch", "1", "--isl", "1024", "--osl", "128",
                             "--data", "aic-package", "--json"], cwd=cwd, env=env, capture_output=True, text=True)
    assert static.returncode == 0, static.stderr
    priced = json.loads(static.stdout)
    assert priced["ttft_ms"] > priced["tpot_ms"] > 0
    run = subprocess.run(["perfledger", "run", "--config", str(config), "--warehouse", "W", "--out", "O", "--json"],
                         cwd=cwd, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["ingest"]["tables"]["kda_perf"] > 0 and result["site"] == str(cwd / "O" / "index.html")
    assert (cwd / "W" / "curated" / "kda_perf" / "_delta_log").is_dir()
    assert (cwd / "O" / "summary.md").is_file() and (cwd / "O" / "ledger-kimi-k3.html").is_file()
    assert (cwd / "O" / "deployments" / "vllm_agg" / "k8s_deploy.yaml").is_file()
    assert (cwd / "var" / "prefect").is_dir()  # Prefect's state under the working directory's state folder
    assert _written_since(start) == []
