"""Resolve one runtime (Dynamo release, backend version, flag-data version, image) from the inputs.

The reference let the image tag follow the Dynamo release while templates followed another version and
floored silently; here every choice comes from one resolution and every approximation is a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from packaging.version import InvalidVersion, Version

from perfledger.generator.errors import GeneratorError
from perfledger.generator.yamlio import load_package_yaml
from perfledger.versions import version_key


def parse_version(text: str, where: str) -> Version:
    """PEP 440 parse (0.5.4.post3, 1.3.0rc14, 0.1.dev19262); bad text names its key."""
    try:
        return Version(str(text))
    except InvalidVersion:
        raise GeneratorError(where, f"not a version: {text!r}") from None


def in_span(version: Version, since: str | None, until: str | None) -> bool:
    """True when since <= version < until (either bound optional)."""
    if since is not None and version < parse_version(since, "since"):
        return False
    return not (until is not None and version >= parse_version(until, "until"))


@lru_cache(maxsize=1)
def runtime_matrix() -> dict[str, Any]:
    return load_package_yaml("runtime_matrix.yaml")


@dataclass(frozen=True)
class Runtime:
    """The resolved runtime. `data_version` is the flag-data version actually used (a floor match)."""

    backend: str
    version: str
    data_version: str
    dynamo_version: str
    image: str
    warnings: tuple[str, ...]


def floor_version(requested: str, known: list[str], backend: str) -> tuple[str, list[str]]:
    """Newest known version <= requested; loud warning when not exact, error when below every entry."""
    want = parse_version(requested, "version")
    ordered = sorted(known, key=version_key)
    if requested in known:
        return requested, []
    below = [v for v in ordered if Version(v) <= want]
    if not below:
        raise GeneratorError("version", f"{backend} {requested} is older than every version with flag data "
                                        f"({', '.join(ordered)})")
    return below[-1], [f"WARNING: no exact flag data for {backend} {requested}; using the rules of "
                       f"{backend} {below[-1]} (backend_config_mapping.yaml)"]


def release_for_data(backend: str, held: list[str]) -> str | None:
    """The newest Dynamo release whose pinned `backend` version is one the perf data holds (None: none is), so a
    config generated without a version describes the version the estimates were priced on."""
    shipping = [d for d, pins in runtime_matrix()["dynamo"].items() if pins.get(backend) in set(held)]
    return max(shipping, key=version_key) if shipping else None


def resolve_runtime(backend: str, version: str | None, dynamo_version: str | None, target: str,
                    known_versions: list[str]) -> Runtime:
    """Pick the Dynamo release and backend version together; image tag and flag data follow them."""
    matrix = runtime_matrix()
    releases = matrix["dynamo"]
    warnings: list[str] = []
    if dynamo_version is not None and dynamo_version not in releases:
        raise GeneratorError("generator_dynamo_version", f"unsupported Dynamo release {dynamo_version!r}; "
                                                         f"supported: {', '.join(releases)}")
    if dynamo_version is None:
        shipping = [d for d, pins in releases.items() if version is not None and pins.get(backend) == version]
        dynamo_version = shipping[-1] if shipping else matrix["default_dynamo_version"]
    pinned = releases[dynamo_version].get(backend)
    if version is None:
        version = pinned
    elif pinned != version and target == "dynamo":
        warnings.append(f"WARNING: Dynamo {dynamo_version} ships {backend} {pinned}, not {version}; the image "
                        f"runs {pinned} unless K8sConfig.k8s_image names an image with {backend} {version}")
    parse_version(version, "version")
    data_version, floor_warnings = floor_version(version, known_versions, backend)
    warnings.extend(floor_warnings)
    family = "dynamo" if target == "dynamo" else "standalone"
    pattern = matrix["images"][family].get(backend)
    if pattern is None:
        supported = ", ".join(matrix["images"][family])
        raise GeneratorError("target", f"target {target!r} supports backends {supported}; {backend} is Dynamo-only")
    image = pattern.format(dynamo_version=dynamo_version, version=version)
    return Runtime(backend, version, data_version, dynamo_version, image, tuple(warnings))


def check_image_tag(image: str, runtime: Runtime, target: str) -> list[str]:
    """Warn when an explicit image's tag does not carry the resolved version (defect 6)."""
    expected = runtime.dynamo_version if target == "dynamo" else runtime.version
    tag = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else ""
    if expected in tag:
        return []
    return [f"WARNING: K8sConfig.k8s_image {image!r} does not carry version {expected}; flags are generated "
            f"for {runtime.backend} {runtime.version} (Dynamo {runtime.dynamo_version})"]
