"""Prefect flows: thin orchestration over the stage packages.

Prefect keeps its state inside the project (git-ignored var/prefect) and sends no analytics, unless the
caller's environment says otherwise.
"""

import os

from perfledger import PROJECT_ROOT

os.environ.setdefault("PREFECT_HOME", str(PROJECT_ROOT / "var" / "prefect"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
