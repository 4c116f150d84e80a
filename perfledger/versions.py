"""One version ordering for the whole code base: PEP 440 (`packaging`), unparseable labels after every version.

Backend version folders are PEP 440 versions (1.3.0rc20 < 1.3.0 < 1.3.0.post1, and 0.1.dev19262 is a dev release
of 0.1, so it sorts below 0.24.0). A label `packaging` cannot parse (a branch name, `main`) sorts after every
version, by its text, and is never an implicit "earlier version" of anything.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version


def version_key(version: str) -> tuple:
    """Sort key: (0, Version) for a PEP 440 version, (1, text) for an unparseable label."""
    try:
        return (0, Version(str(version)))
    except InvalidVersion:
        return (1, str(version))


def is_version(version: str) -> bool:
    """True when the label parses as a PEP 440 version (only those take part in floor / earlier-version walks)."""
    return version_key(version)[0] == 0


def earlier_versions(version: str, available: list[str]) -> list[str]:
    """Versions strictly below `version`, nearest first; unparseable ones are never implicit donors."""
    own = version_key(version)
    return sorted((v for v in available if is_version(v) and version_key(v) < own), key=version_key, reverse=True)
