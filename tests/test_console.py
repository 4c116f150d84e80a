"""Human output helpers (perfledger/console.py): numbers with units and sane precision, tables with a header,
progress bars only on a terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from perfledger.blas import THREAD_VARIABLES
from perfledger.console import number, print_table, progress


@pytest.mark.parametrize(("value", "unit", "text"), [
    (0.012698666503032049, "ms", "0.0127 ms"), (3.008291746179262, "ms", "3.008 ms"), (4460.391234, "ms", "4,460.4 ms"),
    (190.06, "GiB", "190.1 GiB"), (3.889e-06, "", "3.889e-06"), (14408, "", "14,408"), (0.0, "ms", "0 ms"),
    (None, "ms", "-"), (True, "", "True"), ("fp8", "", "fp8"), (float("nan"), "", "nan"),
])
def test_number(value, unit, text):
    assert number(value, unit) == text


def test_table_has_a_header_right_aligned_numbers_and_no_wrapping(capsys):
    long = "x" * 300
    print_table(["op", "context ms"], [["moe", 2609.7123], ["logits_gemm", 0.07345], [long, None]], title="3 ops")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "3 ops" and lines[1].split() == ["op", "context", "ms"]
    assert lines[3].rstrip().endswith("2,609.7") and lines[4].rstrip().endswith("0.07345")
    assert len(lines) == 6 and long in lines[5]  # piped: one line per row, however wide


def test_progress_is_silent_when_stderr_is_not_a_terminal(capfd):
    with progress(3, "pricing") as bar:
        for i in range(3):
            bar.update(i + 1, 3)
    assert capfd.readouterr().err == ""


def stderr_on_a_terminal(argv: list[str]) -> tuple[int, bytes]:
    """Run `argv` with stderr on a pseudo-terminal (stdout discarded); its exit status and what it drew there."""
    main, child = pty.openpty()
    proc = subprocess.run(argv, stderr=child, stdout=subprocess.DEVNULL, timeout=300,
                          env={**os.environ, "TERM": "xterm", "COLUMNS": "100"})
    os.close(child)
    drawn = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    os.close(main)
    return proc.returncode, drawn


def test_progress_draws_on_a_terminal():
    script = ("import time\nfrom perfledger.console import progress\nwith progress(4, 'pricing cells') as bar:\n"
              "    for i in range(4):\n        bar.update(i + 1, 4); time.sleep(0.15)\n")
    code, drawn = stderr_on_a_terminal([sys.executable, "-c", script])
    assert code == 0 and b"pricing cells" in drawn and b"/4" in drawn


def test_progress_is_silent_when_quiet_even_on_a_terminal():
    script = ("from perfledger.console import progress\nwith progress(4, 'pricing cells', quiet=True) as bar:\n"
              "    bar.update(4, 4)\n")
    assert stderr_on_a_terminal([sys.executable, "-c", script]) == (0, b"")


_THREADS_AFTER_NUMPY = ("import os, sys; from perfledger.blas import without_blas_threads\n"
                        "if sys.argv[1] == 'call': without_blas_threads()\n"
                        "import numpy\n"
                        "print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'))")


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through Linux's /proc")
def test_without_blas_threads_loads_numpy_single_threaded_and_keeps_a_users_settings():
    def run(mode: str, **env: str) -> list[str]:
        # the collector puts OMP_NUM_THREADS into an xdist worker's environment
        clean = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
        out = subprocess.run([sys.executable, "-c", _THREADS_AFTER_NUMPY, mode], env={**clean, **env},
                             capture_output=True, text=True, check=True, timeout=120).stdout
        return out.split()

    assert run("call") == ["1", "1"]
    assert run("call", OPENBLAS_NUM_THREADS="2") == ["2", "2"]
    assert run("call", OMP_NUM_THREADS="2") == ["2", "None"]  # a lower-priority variable the user set is respected
    if len(os.sched_getaffinity(0)) > 1:
        assert int(run("skip")[0]) > 1  # the threads it avoids: OpenBLAS starts one per core by default
