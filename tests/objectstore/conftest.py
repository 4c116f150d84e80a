"""A real S3 server for the object-store tests: moto's server mode in its own process on 127.0.0.1.

Started once per test session on a free port and stopped at its end; every test gets a bucket of its own.
The storage options reach every warehouse (and the ingest subprocesses) through $PERFLEDGER_STORAGE_OPTIONS,
so a test names a warehouse only by its `s3://` URI, as a user would.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from perfledger.settings import STORAGE_OPTIONS_ENV


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    options: dict[str, str]

    def bucket(self) -> str:
        """Create a fresh bucket; its `s3://` URI."""
        name = f"wh-{uuid.uuid4().hex[:12]}"
        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/{name}", method="PUT"), timeout=10).close()
        return f"s3://{name}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until_up(endpoint: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"moto server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(f"{endpoint}/", timeout=2).close()
            return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"moto server at {endpoint} did not answer within 60 s")


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    port = _free_port()
    log = Path(tempfile.mkstemp(prefix="moto-", suffix=".log")[1])
    with open(log, "w") as sink:  # the server logs every request: a pipe nobody reads would fill and stall it
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=sink, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(endpoint, proc, log)
        options = {"aws_endpoint_url": endpoint, "aws_region": "us-east-1", "aws_access_key_id": "perfledger",
                   "aws_secret_access_key": "perfledger", "aws_allow_http": "true"}
        saved = {name: os.environ.get(name) for name in (STORAGE_OPTIONS_ENV, "AWS_EC2_METADATA_DISABLED")}
        os.environ[STORAGE_OPTIONS_ENV] = json.dumps(options)
        os.environ["AWS_EC2_METADATA_DISABLED"] = "true"  # credentials are given: never ask an instance endpoint
        try:
            yield S3Server(endpoint, options)
        finally:
            for name, value in saved.items():
                os.environ.pop(name) if value is None else os.environ.__setitem__(name, value)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.unlink(missing_ok=True)


@pytest.fixture
def bucket(s3: S3Server) -> str:
    return s3.bucket()
