"""Staging writer: reference dialect, header freeze, lock protocol under real concurrent processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfledger.collector.lockfile import HOST, FileLock
from perfledger.collector.staging import PREFIX, RowContext, StagingError, append_rows, count_rows
from tests.collector.conftest import COLLECTED, REPO

CTX = RowContext("numpy", "2.4.6", "Intel(R) Xeon(R) Processor", "gemm", "numpy_scipy-openblas")


def _rows(n: int, start: int = 0) -> list[dict]:
    return [{"gemm_dtype": "float32", "m": i, "n": 64, "k": 64, "latency": 0.001 * (i + 1)} for i in range(start, n)]


def test_dialect_matches_real_collector_files(tmp_path):
    """Same bytes-level conventions as ../shared/collected: CRLF, header first, no quoting, repr floats."""
    path = tmp_path / "gemm_perf.txt"
    append_rows(path, CTX, _rows(3))
    raw = path.read_bytes()
    real = (COLLECTED / "h200_sxm" / "moe_perf.txt").read_bytes()
    assert raw.count(b"\r\n") == raw.count(b"\n") == 4 and real.count(b"\r\n") == real.count(b"\n")
    assert raw.endswith(b"\r\n") and real.endswith(b"\r\n") and b'"' not in raw
    assert raw.split(b"\r\n")[0] == b"framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency"
    assert real.split(b"\r\n")[0].split(b",")[:5] == [p.encode() for p in PREFIX]
    assert b",float32,1,64,64,0.002\r\n" in raw
    ours, theirs = pl.read_csv(path), pl.read_csv(COLLECTED / "h200_sxm" / "moe_perf.txt")
    assert ours.columns[:5] == theirs.columns[:5] and ours.columns[-1] == theirs.columns[-1] == "latency"
    assert ours.schema["latency"] == theirs.schema["latency"] == pl.Float64
    assert ours.schema["m"] == pl.Int64 and ours.height == count_rows(path) == 3


def test_header_freeze_refuses_other_columns(tmp_path):
    path = tmp_path / "gemm_perf.txt"
    append_rows(path, CTX, _rows(2))
    before = path.read_bytes()
    power = [{**r, "power": 500.0, "power_limit": 700.0} for r in _rows(1)]
    with pytest.raises(StagingError, match=r"gemm_perf.txt: schema mismatch: file header is .*latency'"):
        append_rows(path, CTX, power)
    assert path.read_bytes() == before and not (tmp_path / "gemm_perf.txt.lock").exists()


def test_rows_with_differing_keys_are_refused(tmp_path):
    with pytest.raises(StagingError, match="row 1 has columns"):
        append_rows(tmp_path / "x_perf.txt", CTX, [_rows(1)[0], {"m": 1, "latency": 1.0}])


def test_fsync_failure_fails_the_write_and_releases_the_lock(tmp_path, monkeypatch):
    """The disk cannot be made to fail on demand; patching os.fsync is the only way to reach this path."""
    def broken(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(StagingError, match="write failed: .*Input/output error"):
        append_rows(tmp_path / "gemm_perf.txt", CTX, _rows(1))
    assert not (tmp_path / "gemm_perf.txt.lock").exists()


def test_live_lock_times_out_with_holder_named(tmp_path):
    target = tmp_path / "gemm_perf.txt"
    holder = FileLock(target)
    holder.acquire()
    try:
        with pytest.raises(StagingError, match=r"gemm_perf.txt.lock: could not acquire within 0s"):
            append_rows(target, CTX, _rows(1), lock_timeout_s=0.3)
    finally:
        holder.release()
    assert not target.exists()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_lock_stale_by_age_is_broken(tmp_path):
    target = tmp_path / "gemm_perf.txt"
    lock = tmp_path / "gemm_perf.txt.lock"
    lock.write_text("otherhost 1 deadbeef")  # another host: only age can tell
    old = time.time() - 120
    os.utime(lock, (old, old))
    stats = append_rows(target, CTX, _rows(1), stale_after_s=60)
    assert stats.broke_stale == 1 and count_rows(target) == 1


WRITER = """
import json, sys
from perfledger.collector.staging import RowContext, append_rows
wid, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ctx = RowContext("numpy", "2.4.6", "cpu", "gemm", "writer-%d" % wid)
broke = 0
for i in range(n):
    stats = append_rows(path, ctx, [{"gemm_dtype": "float32", "m": wid, "n": i, "k": 1, "latency": 0.5}],
                        stale_after_s=60)
    broke += stats.broke_stale
print(json.dumps({"writer": wid, "broke": broke}))
"""


def test_concurrent_appends_with_planted_stale_lock(tmp_path):
    """Several processes append at once behind a stale lock: no row lost, none interleaved, one breaker."""
    target = tmp_path / "gemm_perf.txt"
    (tmp_path / "gemm_perf.txt.lock").write_text(f"{HOST} {_dead_pid()} planted")
    writers, per = 6, 60
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(w), str(per), str(target)], env=env,
                              stdout=subprocess.PIPE, text=True) for w in range(writers)]
    results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sum(r["broke"] for r in results) == 1
    lines = target.read_bytes().split(b"\r\n")
    assert lines[-1] == b"" and lines[0].startswith(b"framework,")
    body = [line.decode().split(",") for line in lines[1:-1]]
    assert len(body) == writers * per
    assert all(len(f) == 10 and f[4] == f"writer-{f[6]}" and f[9] == "0.5" for f in body)  # nothing interleaved
    assert {(int(f[6]), int(f[7])) for f in body} == {(w, i) for w in range(writers) for i in range(per)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gemm_perf.txt"]  # no lock or breaker debris


_label = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(_label, st.integers(-(2**40), 2**40),
                               st.floats(min_value=1e-9, max_value=1e6, allow_nan=False)), min_size=1, max_size=8),
       device=_label)
def test_whatever_is_written_reads_back_exactly(tmp_path_factory, rows, device):
    """Property: polars reads back every cell as written (labels with commas/quotes get CSV quoting)."""
    path = tmp_path_factory.mktemp("p") / "x_perf.txt"
    ctx = RowContext("numpy", "2.4.6", device, "gemm", "k")
    append_rows(path, ctx, [{"label": a, "n": b, "latency": c} for a, b, c in rows])
    df = pl.read_csv(path, schema_overrides={"device": pl.String, "label": pl.String})
    assert df["label"].to_list() == [r[0] for r in rows] and df["n"].to_list() == [r[1] for r in rows]
    assert df["latency"].to_list() == [r[2] for r in rows] and df["device"].unique().to_list() == [device]
