"""Shared helpers for collector tests: repo paths, real collected data, running the CLI as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / ".." / "shared"
COLLECTED = SHARED / "collected" / "vllm-0.20.0-campaign"


def cli(*args: str, check: bool = True, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run `perfledger <args>` in a fresh interpreter (the way users and scripts run it)."""
    proc = subprocess.run([sys.executable, "-m", "perfledger.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, PYTHONPATH=str(REPO)))
    if check and proc.returncode != 0:
        raise AssertionError(f"perfledger {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def cli_json(*args: str) -> dict:
    return json.loads(cli(*args, "--json").stdout)


def write_grid(path: Path, cases: list[dict], *, runs: int = 3, warmup: int = 1) -> Path:
    """A small gemm grid file (exact cases, one sweep block each)."""
    import yaml

    doc = {"columns": ["gemm_dtype", "m", "n", "k"], "timing": {"warmup": warmup, "runs": runs},
           "sweeps": [dict(c) for c in cases]}
    path.write_text(yaml.safe_dump(doc))
    return path


def read_events(out: Path, op: str = "gemm", backend: str = "cpu") -> list[dict]:
    path = out / "logs" / f"{backend}.{op}" / "tasks.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

