"""Deployment planning speed: `perfledger plan` vs `aiconfigurator cli default` (0.12.0), the same questions side by side.

Per question, three timings (medians over --repeats): ours warm (in-process `search.plan` on an Estimator that
has answered the question once, so its tables and grids are loaded), ours cold (a fresh `perfledger plan --json
--out DIR` process: imports, data load, search, rendering and the plot) and the reference (a fresh `aiconfigurator
cli default` process, which also writes its configs and plot). Both answer agg and disagg on the wheel's data, and
both import from bytecode: ours is compiled first, as pip compiles an installed wheel (the reference's is), where
PYTHONDONTWRITEBYTECODE would otherwise make every cold run recompile our ~150 modules (~0.13 s).
Prints the ratios reference / ours, on wall time and on CPU time (user + system of the process, its children
included): on a shared machine the wall time of both sides stretches with the load, the CPU time much less.
Run: .venv/bin/python benchmarks/plan.py [--repeats 3] [--questions 0,1]
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
STAGES = ("perfledger", "perfledger.collector", "perfledger.estimator", "perfledger.flows", "perfledger.generator",
          "perfledger.ledger", "perfledger.reports", "perfledger.schemas", "perfledger.warehouse")
# (model, total GPUs, system, backend, isl, osl, TTFT ms, TPOT ms)
QUESTIONS = [
    ("Qwen/Qwen3-32B", 8, "h200_sxm", "vllm", 4000, 500, 2000, 30),
    ("Qwen/Qwen3-32B", 4, "h200_sxm", "trtllm", 1000, 1000, 500, 40),
    ("Qwen/Qwen3-30B-A3B", 8, "h200_sxm", "vllm", 2000, 500, 1000, 20),
]


def _args(q) -> list[str]:
    model, gpus, system, backend, isl, osl, ttft, tpot = q
    return ["--total-gpus", str(gpus), "--system", system, "--backend", backend, "--isl", str(isl), "--osl", str(osl),
            "--ttft", str(ttft), "--tpot", str(tpot)]


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(cmd: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one fresh process."""
    t0, c0 = time.perf_counter(), _cpu_children()
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "MPLBACKEND": "Agg"})
    return time.perf_counter() - t0, _cpu_children() - c0


def ours_warm(q, repeats: int) -> list[tuple[float, float]]:
    from perfledger.estimator.plan.question import Question, resolve_version
    from perfledger.estimator.plan.search import plan
    from perfledger.estimator.session import Estimator, open_source

    model, gpus, system, backend, isl, osl, ttft, tpot = q
    est = Estimator(open_source("aic-package"))
    question = resolve_version(est.source, Question(model, system, backend, gpus, isl, osl, ttft, tpot))
    plan(est, question)  # warm-up: tables, grids, sites loaded once per process
    times = []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        plan(est, question)
        times.append((time.perf_counter() - t0, time.process_time() - c0))
    return times


def compile_ours() -> None:
    """Bytecode for every stage package (see the module docstring)."""
    for stage in STAGES:
        for folder in importlib.util.find_spec(stage).submodule_search_locations:
            compileall.compile_dir(folder, quiet=1)


def _median(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(w for w, _ in pairs), statistics.median(c for _, c in pairs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--questions", default=",".join(str(i) for i in range(len(QUESTIONS))))
    args = ap.parse_args()
    compile_ours()
    rows = []
    for i in (int(x) for x in args.questions.split(",")):
        q = QUESTIONS[i]
        warm = _median(ours_warm(q, args.repeats))
        cold, ref = [], []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                cold.append(_timed([str(BIN / "perfledger"), "plan", "--model", q[0], *_args(q), "--data", "aic-package",
                                    "--json", "--out", str(Path(tmp) / "ours")]))
                ref.append(_timed([str(BIN / "aiconfigurator"), "cli", "default", "--model-path", q[0], *_args(q),
                                   "--save-dir", str(Path(tmp) / "ref"), "--log-level", "WARNING"]))
        rows.append((f"{q[0]} {q[1]}×{q[2]} {q[3]} isl{q[4]} osl{q[5]}", warm, _median(cold), _median(ref)))
        name, (ww, wc), (cw, cc), (rw, rc) = rows[-1]
        print(f"[{i}] {name}: wall s ours warm {ww:.2f} / cold {cw:.2f} / reference {rw:.2f}; "
              f"CPU s {wc:.2f} / {cc:.2f} / {rc:.2f}", flush=True)
    head = f"{'question':<48}{'':>6}{'warm':>8}{'cold':>8}{'ref':>8}{'ref/warm':>10}{'ref/cold':>10}"
    print("\n" + head)
    for name, warm, cold_s, ref_s in rows:
        for k, label in ((0, "wall s"), (1, "CPU s")):
            print(f"{name if k == 0 else '':<48}{label:>6}{warm[k]:>8.2f}{cold_s[k]:>8.2f}{ref_s[k]:>8.2f}"
                  f"{ref_s[k] / warm[k]:>10.1f}{ref_s[k] / cold_s[k]:>10.1f}")
    print(f"(medians of {args.repeats}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
