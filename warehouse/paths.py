"""Where the warehouse lives: --warehouse flag, then $PERFLEDGER_WAREHOUSE, then the project's var/."""

from __future__ import annotations

import os
from pathlib import Path

from perfledger import PROJECT_ROOT

ENV_VAR = "PERFLEDGER_WAREHOUSE"
DEFAULT_ROOT = PROJECT_ROOT / "var" / "warehouse"


def resolve_root(cli_value: str | os.PathLike | None = None) -> Path:
    """The warehouse root to use; created lazily by the first write."""
    if cli_value:
        return Path(cli_value).expanduser().resolve()
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser().resolve()
    return DEFAULT_ROOT
