"""Agreement of our built support matrix with an imported state, per model, every disagreement bucketed.

    .venv/bin/python benchmarks/matrix_agreement.py --ours before --ours after \
        [--imported ../shared/aic/support_matrix/head-095f58a] [--warehouse var/warehouse] [--models A,B] [--json]

`--ours` names stored snapshot labels (build them first: `perfledger matrix build kimi-k3 deepseek-v3
qwen3-235b-a22b --label after`); each is compared with the imported state on the keys both hold
(ledger/matrix/explain.py), and each disagreeing key falls in the first bucket below whose test matches, so the
numbers in docs/ledger.md are reproducible.

`--adjudicate` asks the oracle about every key where the imported state FAILs and we pass: the imported row's
Command runs through the installed `aiconfigurator cli default` (0.12.0, on its wheel's data; SILICON as the row
asks, then HYBRID where SILICON finds nothing for the mode, as HYBRID_PASS is graded), one run per distinct
command, ~15-75 s each on Kimi-K3; those keys are then bucketed by 0.12.0's own verdict (`adjudicated`).
`--models` (comma-separated HF ids, default all of MODELS) limits the comparison, and so the adjudication, to those.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

MODELS = ("moonshotai/Kimi-K3", "deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-235B-A22B")
HEAD = Path(__file__).resolve().parents[1] / ".." / "shared" / "aic" / "support_matrix" / "head-095f58a"
PASSES = ("PASS", "HYBRID_PASS")
# imported FAIL signatures that are facts about the model/data (anything else behind a Traceback is a crash)
FACTS = re.compile(r"InsufficientMemoryError|KVCacheCapacityError|Missing silicon data|Unsupported \w+ quant mode|"
                   r"NoFeasibleConfigError|CP requires|No custom_allreduce silicon data|does not support FP\d", re.I)


def bucket(d: dict, wheel_cells: frozenset = frozenset()) -> str:
    """One disagreement (explain.model_disagreements row) -> why the two sides differ. `wheel_cells`: the
    (system, backend, version) the wheel's own matrix lists (0.12.0 on the data our warehouse holds)."""
    ours, theirs, msg, their_msg = d["ours"], d["imported"], d["reason"] or "", d["imported_reason"] or ""
    cell = (d["System"], d["Backend"], d["Version"])
    if ours == "FAIL" and msg.startswith(("agg search: search refused", "disagg search: search refused")):
        return f"ours: {msg.split(':')[0]} refused by our search (architecture/layout not priced yet)"
    if ours == "FAIL" and msg.startswith("lane "):
        return "ours (one-replica heuristic): a lane without collected rows at that version"
    if ours == "FAIL" and re.search(r"no \w+ rows for \S+ in the warehouse", msg):
        return "our data differs: no rows at that version dir in our warehouse"
    if ours == "FAIL" and "missing data" in msg and wheel_cells and cell not in wheel_cells:
        return "our data differs: a partial version dir (a slice missing; the wheel's own matrix does not list it)"
    if theirs == "FAIL" and their_msg and not FACTS.search(their_msg):
        crash = their_msg.split("Last exception: ")[-1].split(" for op")[0][:60]
        return f"reference crashed (Traceback: {crash}), not a model fact"
    if ours in PASSES and theirs in PASSES:
        return f"tier differs ({theirs} vs ours {ours})"
    if theirs in ("HW_INCOMPATIBLE", "FRAMEWORK_INCOMPATIBLE") or ours in ("HW_INCOMPATIBLE", "FRAMEWORK_INCOMPATIBLE"):
        return f"classification differs ({theirs} vs ours {ours})"
    if ours in PASSES and theirs == "FAIL":
        return f"search parity gap: reference FAIL ({FACTS.search(their_msg).group(0)}), ours {ours}"
    if ours == "FAIL" and theirs in PASSES:
        kind = msg.split(": ")[1] if ": " in msg else msg
        return f"search parity gap: ours FAIL ({kind}), reference {theirs}"
    return f"other ({theirs} vs ours {ours})"


def reference_found(command: str, database_mode: str | None, work: Path) -> dict[str, bool]:
    """Whether 0.12.0's `cli default` finds a config meeting the SLA, per mode, for an imported row's Command
    (`uv run aiconfigurator cli default ...`) run through the installed reference, optionally in another database
    mode; a run that finds nothing for a mode writes no best-config table for it."""
    args = shlex.split(command)
    args = [str(Path(sys.executable).with_name("aiconfigurator"))] + args[args.index("aiconfigurator") + 1:]
    if database_mode:
        if "--database-mode" in args:
            args[args.index("--database-mode") + 1] = database_mode
        else:
            args += ["--database-mode", database_mode]
    save = Path(tempfile.mkdtemp(dir=work))
    subprocess.run([*args, "--save-dir", str(save), "--log-level", "WARNING"], capture_output=True, timeout=900)
    return {mode: any(len(f.read_text().splitlines()) > 1 for f in save.glob(f"*/*/{mode}/best_config_topn.csv"))
            for mode in ("agg", "disagg")}


def adjudicated(d: dict, command: str, runs: dict, work: Path) -> str:
    """A key where the imported state FAILs and we pass, bucketed by 0.12.0's own verdict (PASS when SILICON finds a
    config, HYBRID_PASS when only HYBRID does, else FAIL); `runs` caches one reference run per (command, mode)."""
    def found(database_mode):
        if (command, database_mode) not in runs:
            runs[(command, database_mode)] = reference_found(command, database_mode, work)
        return runs[(command, database_mode)][d["Mode"]]

    verdict = "PASS" if found(None) else "HYBRID_PASS" if found("HYBRID") else "FAIL"
    their_reason = FACTS.search(d["imported_reason"]).group(0)
    if verdict == "FAIL":
        return f"search parity gap: 0.12.0 fails too ({their_reason} imported), ours {d['ours']}"
    if verdict == d["ours"]:
        return f"imported state differs from 0.12.0: imported FAIL ({their_reason}), 0.12.0 and ours {verdict}"
    return f"imported state differs from 0.12.0 (imported FAIL, {their_reason}); tier differs: 0.12.0 {verdict}, ours {d['ours']}"


def wheel_cells() -> frozenset:
    """(system, backend, version) of the wheel's own support matrix (0.12.0's answer on the wheel's data)."""
    from perfledger import settings
    from perfledger.ledger.matrix.reader import read_matrix

    frame = read_matrix(settings.aic_package_dir() / "systems" / "support_matrix")
    return frozenset(frame.select("System", "Backend", "Version").unique().iter_rows())


def measure(wh, label: str, imported, models=MODELS, cells: frozenset = frozenset(), adjudicate: Path | None = None
            ) -> dict:
    """Per model: shared keys, agreement and the disagreements by bucket; `adjudicate` (a work folder): the keys
    the imported state FAILs and we pass go to the reference (`adjudicated`)."""
    from perfledger.ledger.matrix.explain import model_disagreements
    from perfledger.ledger.matrix.rules import load_rules
    from perfledger.ledger.matrix.store import resolve

    _, ours = resolve(wh, label)
    key = [c for c in load_rules().key if c != "Architecture"]  # a disagreement row names the model and key[1:]
    commands = {tuple(r[c] for c in key): r["Command"] for r in imported.iter_rows(named=True)}
    runs: dict = {}
    out = {}
    for model in models:
        result = model_disagreements(ours, imported, model)
        buckets: dict[str, int] = {}
        for d in result["disagree"]:
            b = bucket(d, cells)
            if adjudicate is not None and b.startswith("search parity gap: reference FAIL"):
                b = adjudicated(d, commands[(model, *(d[c] for c in key[1:]))], runs, adjudicate)
            buckets[b] = buckets.get(b, 0) + 1
        shared = result["agree"] + len(result["disagree"])
        out[model] = {"shared": shared, "agree": result["agree"], "disagree": len(result["disagree"]),
                      "only_ours": result["only_ours"], "only_imported": result["only_imported"],
                      "buckets": dict(sorted(buckets.items(), key=lambda kv: -kv[1]))}
    return out


def main() -> None:
    from perfledger.ledger.matrix.reader import read_matrix
    from perfledger.warehouse.paths import resolve_root
    from perfledger.warehouse.store import Warehouse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ours", action="append", required=True, help="stored snapshot label (repeat: before, after)")
    ap.add_argument("--imported", default=str(HEAD))
    ap.add_argument("--warehouse", default=None)
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated HF ids (default: all of MODELS)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--adjudicate", action="store_true",
                    help="run 0.12.0 on every key the imported state FAILs and we pass (minutes per model)")
    args = ap.parse_args()
    wh = Warehouse(resolve_root(args.warehouse))
    imported = read_matrix(Path(args.imported))
    cells = wheel_cells()
    with tempfile.TemporaryDirectory() as work:
        results = {label: measure(wh, label, imported, args.models.split(","), cells,
                                  adjudicate=Path(work) if args.adjudicate else None)
                   for label in args.ours}
    if args.json:
        print(json.dumps(results, indent=1))
        return
    for label, per_model in results.items():
        print(f"## {label} vs {Path(args.imported).name}")
        print("| model | shared keys | agree | disagree | only ours | only imported |")
        print("|---|---|---|---|---|---|")
        for model, r in per_model.items():
            print(f"| {model} | {r['shared']} | {r['agree']} | {r['disagree']} | {r['only_ours']} | {r['only_imported']} |")
        for model, r in per_model.items():
            for b, n in r["buckets"].items():
                print(f"- {model}: {n} × {b}")
        print()


if __name__ == "__main__":
    main()
