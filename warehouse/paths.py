"""Where the warehouse lives: --warehouse, then $PERFLEDGER_WAREHOUSE, then <state dir>/warehouse (perfledger.settings).

A folder, or a URI on object storage (`s3://bucket/prefix`, `gs://`, `az://`) with its storage options.
"""

from __future__ import annotations

import os
from pathlib import Path

from perfledger.settings import Location, warehouse_root


def resolve_root(cli_value: str | os.PathLike | None = None) -> Location:
    """The warehouse root to use: a local folder made absolute (a later change of working directory cannot
    move it; created lazily by the first write), or an ObjectLocation as named."""
    root = warehouse_root(cli_value)
    return root.resolve() if isinstance(root, Path) else root
