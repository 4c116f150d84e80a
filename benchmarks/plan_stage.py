"""What the pipeline's `plan` stage costs `perfledger run`: the configured questions over a warehouse, stored and rendered.

Runs the stage's own function (flows.tasks.plan_task: search every question, gate against the stored plans, write the
next `plans` version, render each best through the generator) on a copy of the warehouse, so the measured warehouse is
left as it was; prints wall and CPU seconds (CPU: user + system of this process, threads included, which stretches
far less than wall time on a loaded machine) and each question's verdict and change note.
Run after `make run`: .venv/bin/python benchmarks/plan_stage.py [--warehouse var/warehouse] [--config FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", default="var/warehouse", help="a warehouse `make run` filled")
    parser.add_argument("--config", default=None, help="pipeline config (default: the embedded one)")
    args = parser.parse_args()
    from perfledger.flows.config import load_pipeline_config
    from perfledger.flows.tasks import plan_task
    from perfledger.generator.api import held_versions

    cfg = load_pipeline_config(Path(args.config) if args.config else None)
    with tempfile.TemporaryDirectory() as tmp:
        root, out = Path(tmp) / "wh", Path(tmp) / "out"
        shutil.copytree(args.warehouse, root)
        wall, cpu = time.perf_counter(), time.process_time()
        report = plan_task.fn(str(root), str(out), cfg.plans, cfg.gate, held_versions(str(root)))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps({"questions": len(cfg.plans), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                      "gate": report["gate"]["status"],
                      "answers": [{"question": q["label"], "verdict": q["verdict"], "change": q["change"]}
                                  for q in report["questions"]]}, indent=1))


if __name__ == "__main__":
    main()
