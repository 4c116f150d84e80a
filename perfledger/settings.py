"""Where perfledger reads and writes, resolved the same way by every command.

Each location is an explicit option first, then an environment variable, then a documented default; none
depends on a checkout being around the installed package:

| location | option | environment | default |
|---|---|---|---|
| state folder | — | `PERFLEDGER_HOME` | `./var` (the working directory) |
| warehouse | `--warehouse` | `PERFLEDGER_WAREHOUSE` | `<state>/warehouse` (or `s3://bucket/prefix`, `gs://`, `az://`) |
| storage options | — | `PERFLEDGER_STORAGE_OPTIONS` (JSON), `PERFLEDGER_STORAGE_FILE` (TOML) | `<state>/storage.toml` |
| reports / site | `--out` | `PERFLEDGER_OUT` | `<state>/reports` |
| Prefect home | — | `PREFECT_HOME` | `<state>/prefect` |
| reference data | `perfledger --reference-data DIR` | `PERFLEDGER_REFERENCE_DATA` | none |
| aiconfigurator-core data | — | — | the installed `aic` extra's package folder |

Relative option values resolve against the working directory. A pipeline config (`--config FILE`)
resolves its own relative paths against the file's folder, and names data shipped inside the wheel as
`package://<package>/<path>` (e.g. `package://perfledger.generator/examples/vllm_agg.yaml`); the
embedded default config names only such resources, so it works from any folder.

A warehouse on object storage is a URI plus storage options (deltalake's / obstore's keys, e.g.
`aws_endpoint_url`, `aws_region`, `aws_access_key_id`, `aws_allow_http`): the TOML settings file's table
with the longest URI prefix of the location, then `$PERFLEDGER_STORAGE_OPTIONS` on top; the libraries'
own environment variables (`AWS_*`, `GOOGLE_*`, `AZURE_*`) fill in the rest. Options never appear in a
location's text, so messages and stored rows name only the URI.

Reference data is a folder laid out like the team's shared data (`aic/systems/`, `aic/model_configs/`,
`aic/catalogs/`); it is only read when given. System specs, model configs and the cross-backend manifest
otherwise come from the installed `aic` extra (aiconfigurator-core's wheel).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path, PurePosixPath

HOME_ENV = "PERFLEDGER_HOME"
WAREHOUSE_ENV = "PERFLEDGER_WAREHOUSE"
OUT_ENV = "PERFLEDGER_OUT"
REFERENCE_ENV = "PERFLEDGER_REFERENCE_DATA"
STORAGE_OPTIONS_ENV = "PERFLEDGER_STORAGE_OPTIONS"
STORAGE_FILE_ENV = "PERFLEDGER_STORAGE_FILE"
PACKAGE_SCHEME = "package://"
OBJECT_SCHEMES = ("s3", "s3a", "gs", "az", "abfs", "abfss")  # what deltalake's and obstore's stores both open
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$")


class LocationError(ValueError):
    """A location names a scheme perfledger cannot store to, or its storage options are unreadable."""


@dataclass(frozen=True)
class ObjectLocation:
    """A place on object storage: `scheme://bucket/key/prefix` and the storage options to reach it.

    Joins like a path (`location / "curated"`); `str()` is the URI alone, never the options (credentials)."""

    uri: str
    options: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # may hold credentials: never printed

    def __truediv__(self, part: str) -> ObjectLocation:
        return ObjectLocation(f"{self.uri}/{str(part).strip('/')}", self.options)

    def __str__(self) -> str:
        return self.uri

    @property
    def name(self) -> str:
        return self.uri.rsplit("/", 1)[-1]

    @property
    def scheme(self) -> str:
        return self.uri.split("://", 1)[0]

    @property
    def bucket(self) -> str:
        return self.uri.split("://", 1)[1].split("/", 1)[0]

    @property
    def key(self) -> str:
        """The object-key prefix inside the bucket ('' at the bucket's top)."""
        rest = self.uri.split("://", 1)[1]
        return rest.split("/", 1)[1] if "/" in rest else ""

    @property
    def storage_options(self) -> dict[str, str]:
        return dict(self.options)

    def relative_to(self, other: ObjectLocation) -> PurePosixPath:
        if self.uri != other.uri and not self.uri.startswith(other.uri + "/"):
            raise ValueError(f"{self.uri} is not inside {other.uri}")
        return PurePosixPath(self.uri[len(other.uri) + 1:])


Location = Path | ObjectLocation


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


def is_object_uri(value: str | os.PathLike | ObjectLocation | None) -> bool:
    """Whether a location value names object storage (any `scheme://` but `file://`)."""
    match = _URI.match(str(value)) if value is not None and not isinstance(value, Path) else None
    return match is not None and match.group(1).lower() != "file"


def storage_settings_file() -> Path:
    return _chosen(None, STORAGE_FILE_ENV) or state_dir() / "storage.toml"


def storage_options(uri: str) -> dict[str, str]:
    """Options for `uri`: the settings file's table with the longest prefix of it, then the JSON of
    $PERFLEDGER_STORAGE_OPTIONS on top. Values are strings (what deltalake and obstore take)."""
    options: dict[str, str] = {}
    path = storage_settings_file()
    if path.is_file():
        try:
            tables = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise LocationError(f"{path}: unreadable storage settings ({exc})") from None
        prefixes = sorted((p for p, v in tables.items() if isinstance(v, dict) and
                           (uri == p.rstrip("/") or uri.startswith(p.rstrip("/") + "/"))), key=len)
        for prefix in prefixes:
            options.update({str(k): _option_text(v) for k, v in tables[prefix].items()})
    if text := os.environ.get(STORAGE_OPTIONS_ENV):
        try:
            given = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LocationError(f"${STORAGE_OPTIONS_ENV}: not JSON ({exc})") from None
        if not isinstance(given, dict):
            raise LocationError(f"${STORAGE_OPTIONS_ENV}: must be a JSON object of option: value")
        options.update({str(k): _option_text(v) for k, v in given.items()})
    return options


def _option_text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def location(value: str | os.PathLike | ObjectLocation) -> Location:
    """A local folder (`~` expanded; `file://` accepted) or an ObjectLocation with its storage options."""
    if isinstance(value, ObjectLocation):
        return value
    text = str(value)
    match = _URI.match(text) if not isinstance(value, Path) else None
    if match is None:
        if text.split(":/", 1)[0].lower() in OBJECT_SCHEMES and ":/" in text:
            raise LocationError(f"{text}: an object-store URI that became a path ('//' lost); pass the URI as text")
        return Path(text).expanduser()
    scheme, rest = match.group(1).lower(), match.group(2).rstrip("/")
    if scheme == "file":
        return Path(rest or "/")
    if scheme not in OBJECT_SCHEMES or not rest or rest.startswith("/"):
        raise LocationError(f"{text}: unsupported location; use a folder or one of "
                            f"{', '.join(s + '://bucket/prefix' for s in ('s3', 'gs', 'az'))}")
    uri = f"{scheme}://{rest}"
    return ObjectLocation(uri, tuple(sorted(storage_options(uri).items())))


def warehouse_root(option: str | os.PathLike | None = None) -> Location:
    """The warehouse location: --warehouse, else $PERFLEDGER_WAREHOUSE, else <state>/warehouse."""
    value = option if option not in (None, "") else os.environ.get(WAREHOUSE_ENV) or None
    return location(value) if value is not None else state_dir() / "warehouse"


def reports_dir(option: str | os.PathLike | None = None) -> Path:
    """The output folder (site, summary, stage cache): local disk only."""
    value = option if option not in (None, "") else os.environ.get(OUT_ENV) or None
    if is_object_uri(value):
        raise LocationError(f"{value}: the site and reports are written to a local folder; object storage holds "
                            f"only the warehouse (--out / ${OUT_ENV})")
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
