"""Where perfledger reads and writes, resolved the same way by every command.

Each location is an explicit option first, then an environment variable, then a documented default; none
depends on a checkout being around the installed package:

| location | option | environment | default |
|---|---|---|---|
| state folder | — | `PERFLEDGER_HOME` | `./var` (the working directory) |
| warehouse | `--warehouse` | `PERFLEDGER_WAREHOUSE` | `<state>/warehouse` |
| reports / site | `--out` | `PERFLEDGER_OUT` | `<state>/reports` |
| Prefect home | — | `PREFECT_HOME` | `<state>/prefect` |
| reference data | `perfledger --reference-data DIR` | `PERFLEDGER_REFERENCE_DATA` | none |
| aiconfigurator-core data | — | — | the installed `aic` extra's package folder |

Relative option values resolve against the working directory. A pipeline config (`--config FILE`)
resolves its own relative paths against the file's folder, and names data shipped inside the wheel as
`package://<package>/<path>` (e.g. `package://perfledger.generator/examples/vllm_agg.yaml`); the
embedded default config names only such resources, so it works from any folder.

Reference data is a folder laid out like the team's shared data (`aic/systems/`, `aic/model_configs/`,
`aic/catalogs/`); it is only read when given. System specs, model configs and the cross-backend manifest
otherwise come from the installed `aic` extra (aiconfigurator-core's wheel).
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

HOME_ENV = "PERFLEDGER_HOME"
WAREHOUSE_ENV = "PERFLEDGER_WAREHOUSE"
OUT_ENV = "PERFLEDGER_OUT"
REFERENCE_ENV = "PERFLEDGER_REFERENCE_DATA"
PACKAGE_SCHEME = "package://"


def _chosen(option: str | os.PathLike | None, env: str) -> Path | None:
    value = option if option not in (None, "") else os.environ.get(env) or None
    return Path(value).expanduser() if value is not None else None


def state_dir() -> Path:
    """The folder for mutable state (warehouse, reports, Prefect's database) unless each is set itself."""
    return _chosen(None, HOME_ENV) or Path.cwd() / "var"


def package_file(package: str, *parts: str) -> Path:
    """A file or folder shipped inside one of our packages (the wheel installs as plain files, never zipped)."""
    return Path(str(resources.files(package).joinpath(*parts)))


def config_path(value: str | os.PathLike, base: Path) -> Path:
    """A path named in a config file: `package://<package>/<path>` is package data, a relative path sits
    under the file's folder `base`, an absolute one stays."""
    text = str(value)
    if text.startswith(PACKAGE_SCHEME):
        package, _, rest = text.removeprefix(PACKAGE_SCHEME).partition("/")
        return package_file(package, *Path(rest).parts)
    path = Path(text).expanduser()
    return path if path.is_absolute() else base / path


def warehouse_root(option: str | os.PathLike | None = None) -> Path:
    return _chosen(option, WAREHOUSE_ENV) or state_dir() / "warehouse"


def reports_dir(option: str | os.PathLike | None = None) -> Path:
    return _chosen(option, OUT_ENV) or state_dir() / "reports"


def prefect_home() -> Path:
    return _chosen(None, "PREFECT_HOME") or state_dir() / "prefect"


def reference_data(option: str | os.PathLike | None = None) -> Path | None:
    """The optional reference-data folder; an explicitly named one that does not exist is an error."""
    path = _chosen(option, REFERENCE_ENV)
    if path is not None and not path.is_dir():
        raise FileNotFoundError(f"reference data folder {path} does not exist (--reference-data / ${REFERENCE_ENV})")
    return path


@lru_cache(maxsize=1)
def aic_package_dir() -> Path | None:
    """The installed aiconfigurator-core package folder (systems/, model_configs/), found without importing it."""
    spec = importlib.util.find_spec("aiconfigurator_core")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _search(wheel_part: str, reference_part: str) -> list[Path]:
    dirs = []
    if (pkg := aic_package_dir()) is not None:
        dirs.append(pkg / wheel_part)
    if (ref := reference_data()) is not None:
        dirs.append(ref / reference_part)
    return [d for d in dirs if d.is_dir()]


def system_spec_dirs() -> list[Path]:
    """Where `<system>.yaml` GPU specs are looked up, the wheel's own copy first (the parity oracle's)."""
    return _search("systems", "aic/systems")


def model_config_dirs() -> list[Path]:
    """Where `<org>--<name>_config.json` model configs are looked up, the wheel's first."""
    return _search("model_configs", "aic/model_configs")


def reference_catalogs_dir() -> Path | None:
    """The reference data's catalogs folder (cross-backend manifest, kernel catalogs), when one is given."""
    ref = reference_data()
    return ref / "aic" / "catalogs" if ref is not None and (ref / "aic" / "catalogs").is_dir() else None
