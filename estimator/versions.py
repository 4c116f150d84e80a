"""Version strings as sortable keys: 1.3.0rc20 < 1.3.0 < 1.3.0.post1; unparseable sorts last."""

from __future__ import annotations

import re

_PART = re.compile(r"^(\d+)(?:(rc|a|b|dev)(\d*))?$")
_STAGE = {"dev": 0, "a": 1, "b": 2, "rc": 3}


def version_key(version: str) -> tuple:
    """Sort key; pre-releases sort before the final release, `.postN` after it."""
    release: list[int] = []
    pre: tuple[int, int] = (9, 0)
    post = -1
    for token in version.split("."):
        if token.startswith("post") and token[4:].isdigit():
            post = int(token[4:])
            continue
        if token.startswith("dev") and token[3:].isdigit() and release:  # PEP 440 "0.1.dev19262"
            pre = (_STAGE["dev"], int(token[3:]))
            continue
        m = _PART.match(token)
        if m is None:
            return (1, version)
        release.append(int(m.group(1)))
        if m.group(2):
            pre = (_STAGE[m.group(2)], int(m.group(3) or 0))
    return (0, tuple(release), pre, post)


def earlier_versions(version: str, available: list[str]) -> list[str]:
    """Versions strictly below `version`, nearest first; unparseable ones are never implicit donors."""
    own = version_key(version)
    older = [v for v in available if version_key(v)[0] == 0 and version_key(v) < own]
    return sorted(older, key=version_key, reverse=True)
