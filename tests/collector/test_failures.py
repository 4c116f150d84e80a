"""Failure classification from real error messages (reference collector, ../shared docs) and error files."""

from __future__ import annotations

import json

import pytest

from perfledger.collector.failures import CLASSES, classify, errors_path, make_record, read_errors, write_errors

# (error_type, message) -> class. Messages are the texts the reference collector and its frameworks emit,
# as quoted in ../shared/docs/collector-reference.md §2.3 (OOM/IMA detection, int32 guards, worker deaths).
REAL = [
    ("OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB "
                         "of which 1.06 GiB is free.", "oom"),
    ("RuntimeError", "OOM: b=256, s=16384 — skipping", "oom"),
    ("RuntimeError", "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", "oom"),
    ("AcceleratorError", "CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be "
                         "asynchronously reported at some other API call", "illegal_address"),
    ("CudaIllegalAccessError", "prefix=1048576: CUDA illegal access, stopping subprocess", "illegal_address"),
    ("RuntimeError", "CUDA error: unspecified launch failure", "illegal_address"),
    ("RuntimeError", "CUDA driver error: CUDA_ERROR_LAUNCH_FAILED", "illegal_address"),
    ("RuntimeError", "CUBLAS_STATUS_EXECUTION_FAILED when calling cublasGemmEx", "illegal_address"),
    ("ValueError", "causal_conv1d Triton kernel int32 token-offset overflow: total_tokens*conv_channels >= 2**31",
     "int32_guard"),
    ("RuntimeError", "FIXME(kernel-limit) flashinfer.py:1352 head_dim 256 not supported", "kernel_limit"),
    ("RuntimeError", "CUDA error: too many resources requested for launch", "kernel_limit"),
    ("UnsupportedCase", "numpy has no fp8 dtype", "kernel_limit"),
    ("TimeoutExpired", "Command '['python', '-c', ...]' timed out after 600 seconds", "timeout"),
    ("TaskTimeout", "task timed out after 300s on device 1", "timeout"),
    ("WorkerSignalCrash", "worker for device 0 died (signal SIGKILL) while running the task", "crash"),
    ("WorkerAbnormalExit", "worker for device 3 died (code 1) while running the task", "crash"),
    ("ChildCrash", "child killed by signal 11\nFatal Python error: Segmentation fault", "crash"),
    ("RuntimeError", "mla_context_module failed strict completeness: ok=12 error=0 skip=0 rows=0", "unexpected"),
    ("KeyError", "'q_lora_rank'", "unexpected"),
]


@pytest.mark.parametrize("error_type, message, expected", REAL)
def test_classify_real_messages(error_type, message, expected):
    assert classify(error_type, message) == expected


def test_wrapped_child_output_is_classified_by_its_cause():
    """A module child's non-zero exit carries its last output lines; the cause inside decides the class."""
    tail = "\n".join(["loading weights", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"])
    assert classify("ChildAbnormalExit", f"child exited with code 1\n{tail}") == "oom"


def test_record_and_file_roundtrip(tmp_path):
    rec = make_record(backend="cpu", op="gemm", table="gemm_perf", task_id="gemm:abc", case={"m": 1}, device=2,
                      error_type="MemoryError", message="Unable to allocate 8.00 GiB for an array")
    assert rec.classification == "oom" and rec.classification in CLASSES
    path = errors_path(tmp_path, "cpu", "gemm")
    assert path.name == "errors_cpu.gemm.json"
    later = make_record(backend="cpu", op="gemm", table="gemm_perf", task_id="gemm:abc", case={"m": 1}, device=0,
                        error_type="TaskTimeout", message="task timed out after 1s")
    write_errors(path, [rec, later])
    stored = read_errors(path)
    assert len(stored) == 1 and stored[0]["classification"] == "timeout" and stored[0]["device"] == 0
    assert set(stored[0]) >= {"backend", "op", "table", "task_id", "case", "device", "error_type",
                              "classification", "message", "exit_code", "timestamp"}


def test_long_message_keeps_the_tail():
    rec = make_record(backend="cpu", op="gemm", table="gemm_perf", task_id="x", case={}, device=0,
                      error_type="RuntimeError", message="x" * 20000 + "illegal memory access")
    assert len(rec.message) <= 8001 and rec.classification == "illegal_address"


def test_bad_errors_file(tmp_path):
    path = tmp_path / "errors_cpu.gemm.json"
    path.write_text('{"a": 1}')
    with pytest.raises(ValueError, match="errors_cpu.gemm.json: expected a JSON list"):
        read_errors(path)
    path.write_text("[\n{")
    with pytest.raises(ValueError, match=r"errors_cpu.gemm.json: invalid JSON at line 2"):
        read_errors(path)
    assert json.loads("[]") == read_errors(tmp_path / "missing.json")
