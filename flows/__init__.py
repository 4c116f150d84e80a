"""Prefect flows: thin orchestration over the stage packages.

Prefect keeps its state under perfledger's state folder (`settings.prefect_home()`, default ./var/prefect),
sends no analytics, and gives its temporary server 120 s to start (Prefect's 20 s default times out on a busy
2-core machine, failing a run before any stage starts), unless the caller's environment says otherwise.
"""

import os
from pathlib import Path

from perfledger.settings import prefect_home

os.environ.setdefault("PREFECT_HOME", str(prefect_home()))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


def make_prefect_home() -> None:
    """Create Prefect's home before Prefect is imported: Prefect makes only the last folder itself, and its
    database cannot open without it. Left to the commands that run flows, so others write nothing."""
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
