"""Mode 1: run one op module for one device (`python -m perfledger.collector.ops.<op> --device 0 --out DIR [shape flags]`).

Also the child entry of isolated tasks (`--case-json`, `--result-json`): the parent reads the result file
to learn whether the row was written and which CUDA_VISIBLE_DEVICES the child saw. Diagnostic runs write
the same staging rows as Mode 2 but no checkpoint, errors file or collection_meta.yaml.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import traceback
from pathlib import Path

from perfledger.collector.backends import BackendUnavailable, get_backend
from perfledger.collector.case_grid import canonical, load_grid
from perfledger.collector.execute import measure_and_write
from perfledger.collector.failures import atomic_write_text
from perfledger.collector.registry import load_registry


def _parser(default_op: str, columns: tuple[str, ...], grid_values: dict[str, list]) -> argparse.ArgumentParser:
    registry = load_registry()
    siblings = [o for o, e in registry.ops.items() if e.module == registry.get(default_op).module]
    p = argparse.ArgumentParser(prog=f"python -m {registry.get(default_op).module}", description=__doc__)
    p.add_argument("--op", default=default_op, choices=siblings)
    p.add_argument("--device-backend", dest="backend", default="cpu", help="how cases run: cpu | torch")
    p.add_argument("--backend", dest="old_backend", help=argparse.SUPPRESS)  # the old spelling: refused in main
    p.add_argument("--device", type=int, default=0, help="local device index")
    p.add_argument("--out", required=True, type=Path, help="directory for <table>_perf.txt")
    p.add_argument("--case-json", help="run exactly this case (JSON object)")
    p.add_argument("--grid", type=Path, help="case grid YAML replacing collector/cases/<name>.yaml")
    p.add_argument("--result-json", type=Path, help="write {ok, rows, error_type, message} here")
    for col in columns:
        kind = type(grid_values[col][0])
        p.add_argument(f"--{col.replace('_', '-')}", dest=col, nargs="+", type=kind,
                       help=f"values of {col} (default: the grid's {grid_values[col][:6]}...)")
    return p


def _cases(args, columns, grid_values, dtype_field: str, dtypes) -> list[dict]:
    if args.case_json:
        case = json.loads(args.case_json)
        missing = [c for c in columns if c not in case]
        if missing:
            raise SystemExit(f"--case-json: missing keys {missing} (need {list(columns)})")
        return [case]
    axes = [getattr(args, c) or grid_values[c] for c in columns]
    seen = {}
    for combo in itertools.product(*axes):
        case = dict(zip(columns, combo, strict=True))
        if case[dtype_field] in dtypes:
            seen.setdefault(canonical(case), case)
    return list(seen.values())


def main(default_op: str, argv: list[str] | None = None) -> int:
    registry = load_registry()
    op = default_op
    if argv is None:
        argv = sys.argv[1:]
    if "--op" in argv:
        op = argv[argv.index("--op") + 1]
    entry = registry.get(op)
    grid_path = Path(argv[argv.index("--grid") + 1]) if "--grid" in argv else None
    grid = load_grid(entry.cases, grid_path)
    grid_values = {c: list(dict.fromkeys(case[c] for case in grid.cases)) for c in grid.columns}
    parser = _parser(op, grid.columns, grid_values)
    args = parser.parse_args(argv)
    if args.old_backend is not None:
        parser.error(f"--backend {args.old_backend}: the device backend is --device-backend {args.old_backend} now")
    result: dict = {"ok": False, "rows": 0, "pid": os.getpid(),
                    "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    try:
        backend = get_backend(args.backend)
    except BackendUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    gate = entry.backends.get(args.backend)
    cases = _cases(args, grid.columns, grid_values, entry.dtype_field, gate.dtypes if gate else ())
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"collector child: op={op} backend={args.backend} device={args.device} "
          f"CUDA_VISIBLE_DEVICES={result['cuda_visible_devices']} pid={os.getpid()} cases={len(cases)}", flush=True)
    failures = 0
    for case in cases:
        try:
            result["rows"] += measure_and_write(args.out, entry, grid, case, backend, args.device)
            print(f"ok: {case}", flush=True)
        except Exception as exc:  # noqa: BLE001 - diagnostics keep going; the result file carries the error
            failures += 1
            result.update(error_type=type(exc).__name__, message=f"{exc}\n{traceback.format_exc(limit=8)}")
            print(f"FAILED: {case}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    result["ok"] = failures == 0 and bool(cases)
    if not cases:
        result.update(error_type="EmptyPlan", message=f"no case of op {op} runs on backend {args.backend}")
    if args.result_json:
        atomic_write_text(args.result_json, json.dumps(result))
    return 0 if result["ok"] else 1
