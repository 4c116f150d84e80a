"""perfledger: a versioned perf database and everything derived from it."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
