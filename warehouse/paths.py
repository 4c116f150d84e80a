"""Where the warehouse lives: --warehouse, then $PERFLEDGER_WAREHOUSE, then <state dir>/warehouse (perfledger.settings)."""

from __future__ import annotations

import os
from pathlib import Path

from perfledger.settings import warehouse_root


def resolve_root(cli_value: str | os.PathLike | None = None) -> Path:
    """The warehouse root to use, absolute (a later change of working directory cannot move it); created
    lazily by the first write."""
    return warehouse_root(cli_value).resolve()
