"""Reference-scenario estimates (TTFT / TPOT), the prediction regression gate, and the `estimates` table.

Two kinds of scenario: `kind: static` asks the estimator's model assembler for TTFT and TPOT of the
model at (batch, isl, osl) -- a miss (an architecture it cannot assemble yet) is reported, never
filled in; an operator scenario lists operators with a count, and its phase time is the sum of
latency x count. Both run in HYBRID mode (collected data first, transfers labelled).

Every scenario names its parallelism (`deploy: {tp, moe_tp, moe_ep}`); operator shapes and counts are
expressions over the model's config dims (`hidden`, `layers`, `heads * v_head_dim / tp`, ...), evaluated and
checked against the model config, so a scenario cannot silently describe another model. Every row carries the
deployment's per-GPU memory and whether it fits (estimator/models/memory.py), so a deployment that does not fit
is never published without saying so.

`refresh_estimates` stores each pricing as the next version of the warehouse table `estimates` (one
Delta commit: scenario rows with their gate verdicts, the plot's token sweep, and the warehouse table
versions they were priced from), which the site renders. The gate compares with the estimates stored
last time -- the table's version before this write, which each row names in `compared_with` for time
travel -- never with a recomputation.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import yaml

from perfledger.safe_io import InputFileError, load_yaml

DEFAULT_SCENARIOS = Path(__file__).with_name("scenarios.yaml")
ESTIMATES_TABLE = "estimates"
ESTIMATES_SCHEMA = {
    "seq": pl.Int64, "kind": pl.String, "model": pl.String, "hf_model": pl.String, "scenario": pl.String,
    "metric": pl.String, "system": pl.String, "backend": pl.String, "version": pl.String, "tokens": pl.Int64,
    "ms": pl.Float64, "source": pl.String, "error": pl.String, "previous_ms": pl.Float64, "delta_pct": pl.Float64,
    "verdict": pl.String, "gate_status": pl.String, "warn_pct": pl.Float64, "fail_pct": pl.Float64,
    "compared_with": pl.Int64, "previous_priced_at": pl.String, "priced_at": pl.String, "priced_from": pl.String,
    "parallelism": pl.String, "tp": pl.Int64, "moe_tp": pl.Int64, "moe_ep": pl.Int64, "gpus": pl.Int64,
    "batch": pl.Int64, "isl": pl.Int64, "osl": pl.Int64, "memory_gib": pl.Float64, "capacity_gib": pl.Float64,
    "fit": pl.String,
}
GATE_KEY = ("model", "scenario", "parallelism", "metric", "system", "backend", "version")
PARALLELISM = ("tp", "moe_tp", "moe_ep")  # what a scenario's `deploy` names (estimator.static.Deploy's knobs)
FIT = ("fits", "does not fit", "unknown")   # memory fit of a row's deployment; unknown: memory.yaml cannot size it
PHASES = {"prefill": "TTFT", "decode": "TPOT"}
SWEEP_TOKENS = (256, 1024, 4096, 16384)  # the latency-vs-tokens plot's x axis
VALUE_COLUMN = {"gemm": "m", "moe": "tokens"}


class ScenarioError(ValueError):
    """A scenario file entry that cannot be used; names the file and key."""


def load_scenarios(path: Path) -> dict[str, list[dict]]:
    """model -> scenarios, checked: every error names the file and the key path."""
    try:
        raw = load_yaml(Path(path), loader_class=yaml.SafeLoader) or {}
    except InputFileError as exc:
        raise ScenarioError(f"{exc.where}: cannot read scenarios ({exc.reason})") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: expected a mapping model -> list of scenarios")
    for model, scenarios in raw.items():
        if not isinstance(scenarios or [], list):
            raise ScenarioError(f"{path}: {model}: expected a list of scenarios")
        for i, sc in enumerate(scenarios or []):
            where = f"{path}: {model}[{i}]"
            if not isinstance(sc, dict):
                raise ScenarioError(f"{where}: expected a mapping")
            if (sc or {}).get("kind") == "static":
                missing = sorted({"name", "batch", "isl", "osl", "deploy"} - set(sc))
                if missing:
                    raise ScenarioError(f"{where}: missing key(s) {missing}")
                _check_deploy(sc["deploy"], f"{where}.deploy")
                continue
            missing = sorted({"name", "phase", "tokens", "ops", "deploy"} - set(sc or {}))
            if missing:
                raise ScenarioError(f"{where}: missing key(s) {missing}")
            _check_deploy(sc["deploy"], f"{where}.deploy")
            if sc["phase"] not in PHASES:
                raise ScenarioError(f"{where}.phase: {sc['phase']!r} is not one of {sorted(PHASES)}")
            if not isinstance(sc["ops"], list) or not all(isinstance(op, dict) for op in sc["ops"]):
                raise ScenarioError(f"{where}.ops: expected a list of mappings")
            for j, op in enumerate(sc["ops"]):
                if op.get("op") not in VALUE_COLUMN:
                    raise ScenarioError(f"{where}.ops[{j}].op: {op.get('op')!r} is not one of {sorted(VALUE_COLUMN)}")
    return {str(m): list(s or []) for m, s in raw.items()}


def check_scenarios(path: Path, hf_id_of: Callable[[str], str]) -> dict[str, list[dict]]:
    """`load_scenarios` plus what pricing would find later: every model named (`hf_id_of`: scenario model -> HF
    id, a ValueError for an unknown one) and every operator scenario's shapes and counts resolved against its
    model's config, so a bad file fails before a run starts."""
    scenarios = load_scenarios(path)
    for model, items in scenarios.items():
        try:
            names = model_names(hf_id_of(model))
        except ValueError as exc:
            raise ScenarioError(f"{path}: {model}: {exc}") from None
        for i, sc in enumerate(items):
            if sc.get("kind") != "static":
                resolve_ops(sc, {**names, **parallelism(sc["deploy"])}, f"{path}: {model}[{i}] ({sc['name']})")
    return scenarios


def _check_deploy(deploy: object, where: str) -> None:
    """A scenario's parallelism: a mapping of PARALLELISM knobs (and quant overrides) to positive integers."""
    if not isinstance(deploy, dict) or "tp" not in deploy:
        raise ScenarioError(f"{where}: name the parallelism as a mapping with at least `tp` (knobs {', '.join(PARALLELISM)})")
    for knob in PARALLELISM:
        value = deploy.get(knob, 1)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ScenarioError(f"{where}.{knob}: {value!r} is not a positive integer")
    width = deploy.get("moe_tp", 1) * deploy.get("moe_ep", 1)
    if width > 1 and width != deploy["tp"]:  # the static estimate refuses it, as 0.12.0 does (no attention-dp knob here)
        raise ScenarioError(f"{where}: MoE width moe_tp x moe_ep = {width} must equal tp {deploy['tp']}")


def parallelism(deploy: dict) -> dict[str, int]:
    """tp / moe_tp / moe_ep of a scenario's deploy (1 where not named) and the GPUs of one replica (tp: the MoE
    group spans the same GPUs)."""
    knobs = {k: int(deploy.get(k, 1)) for k in PARALLELISM}
    return {**knobs, "gpus": knobs["tp"]}


def parallelism_label(knobs: dict[str, int]) -> str:
    """`tp16 · ep16`: moe_tp shown when it is not 1, ep when it is not 1."""
    parts = [f"tp{knobs['tp']}"] + ([f"moe_tp{knobs['moe_tp']}"] if knobs["moe_tp"] != 1 else [])
    return " · ".join(parts + ([f"ep{knobs['moe_ep']}"] if knobs["moe_ep"] != 1 else []))


def shape(scenario: dict) -> dict[str, int]:
    """batch / isl / osl of a scenario: static ones name them; an operator prefill is one sequence of `tokens`,
    an operator decode step is `tokens` sequences at `isl` (default 1024) context."""
    if scenario.get("kind") == "static":
        return {k: int(scenario[k]) for k in ("batch", "isl", "osl")}
    if scenario["phase"] == "prefill":
        return {"batch": int(scenario.get("batch", 1)), "isl": int(scenario["tokens"]), "osl": 1}
    return {"batch": int(scenario["tokens"]), "isl": int(scenario.get("isl", 1024)), "osl": 1}


def resolve_ops(scenario: dict, names: dict, where: str) -> list[dict]:
    """The scenario's operators with `n`, `k`, `count` evaluated over the model's config dims and the
    parallelism (`names`); each must be a positive whole number and a count at most the model's layer count."""
    from perfledger.estimator.models.config_expr import ConfigExprError, evaluate

    layers = names.get("layers")
    out = []
    for j, spec in enumerate(scenario["ops"]):
        op = dict(spec)
        for key in ("n", "k", "count"):
            if key not in op:
                continue
            try:
                value = evaluate(str(op[key]), names, f"{where}.ops[{j}].{key}")
            except ConfigExprError as exc:
                raise ScenarioError(str(exc)) from None
            if isinstance(value, bool) or not float(value).is_integer() or value < 1:
                raise ScenarioError(f"{where}.ops[{j}].{key}: {op[key]!r} = {value!r} is not a positive whole number "
                                    "for this model and parallelism")
            op[key] = int(value)
        if layers is not None and op.get("count", 1) > layers:
            raise ScenarioError(f"{where}.ops[{j}].count: {op['count']} exceeds the model's {layers} layers")
        out.append(op)
    return out


def model_names(hf_id: str) -> dict:
    """The model's config dims by name (what scenario and memory expressions read), {} when it cannot be sized."""
    from perfledger.estimator.errors import EstimatorError
    from perfledger.estimator.models.config import resolve_model
    from perfledger.estimator.models.memory import sized_model

    try:
        return sized_model(resolve_model(hf_id))[1].as_mapping()
    except EstimatorError:
        return {}


def memory_fit(hf_id: str, cell: tuple[str, str, str], scenario: dict, quants: dict | None = None) -> dict:
    """{memory_gib, capacity_gib, fit} of the scenario's deployment on one system (per GPU; fit "unknown" when
    memory.yaml cannot size the model or the system)."""
    from perfledger.estimator.errors import EstimatorError
    from perfledger.estimator.models.config import resolve_model
    from perfledger.estimator.models.memory import static_memory
    from perfledger.estimator.quant.checkpoint import resolve as resolve_quants

    knobs = parallelism(scenario["deploy"])
    try:
        deploy = scenario["deploy"]
        quants = quants or resolve_quants(resolve_model(hf_id), cell[1], {q: deploy.get(f"{q}_quant") for q in
                                                                          ("gemm", "moe", "kv", "fmha")})
        memory = static_memory(hf_id, cell[0], cell[1], tp=knobs["tp"], moe_tp=knobs["moe_tp"], moe_ep=knobs["moe_ep"],
                               quants=quants, version=cell[2], **shape(scenario))
    except EstimatorError:
        memory = None
    if memory is None:
        return {"memory_gib": None, "capacity_gib": None, "fit": "unknown"}
    return {"memory_gib": memory["total"], "capacity_gib": memory["capacity"],
            "fit": "fits" if memory["fits"] else "does not fit"}


def op_table(op: str) -> str:
    """The perf table an op family reads (the op's declared table)."""
    from perfledger.estimator.ops.registry import get_model

    return get_model(op).table


def slices(inventory: list[dict], table: str, systems: tuple[str, ...]) -> list[tuple[str, str, str]]:
    return sorted({(e["system"], e["backend"], e["version"]) for e in inventory
                   if e["table"] == table and e["system"] in systems})


def price_scenario(est, scenario: dict, cell: tuple[str, str, str]) -> dict:
    """{ms, source} for one scenario on one cell, or {ms: None, error} when an op cannot be priced."""
    from perfledger.estimator.batch import estimate
    from perfledger.estimator.ops.base import TIERS

    total, tiers = 0.0, []
    for spec in scenario["ops"]:
        query = {k: v for k, v in spec.items() if k not in ("op", "count")}
        query[VALUE_COLUMN[spec["op"]]] = int(scenario["tokens"])
        frame = pl.DataFrame([{"system": cell[0], "backend": cell[1], "version": cell[2], **query}])
        try:
            row = estimate(est, spec["op"], frame, mode="hybrid").row(0, named=True)
        except Exception as exc:  # noqa: BLE001 -- any miss (typed estimator errors, absent tables) is reported
            return {"ms": None, "source": None, "error": f"{spec['op']}: {exc}"}
        total += row["latency_ms"] * int(spec.get("count", 1))
        tiers.append(row["source"])
    weakest = max(tiers, key=TIERS.index) if tiers else None
    return {"ms": total, "source": weakest, "error": None}


def price_static(est, hf_model: str, scenario: dict, cell: tuple[str, str, str]) -> dict[str, dict]:
    """{"TTFT": {ms, source, error}, "TPOT": {...}} from the estimator's model assembler."""
    from perfledger.estimator.static import Deploy, static

    try:
        out = static(est, hf_model, Deploy(*cell, **(scenario.get("deploy") or {})), batch=int(scenario["batch"]),
                     isl=int(scenario["isl"]), osl=int(scenario["osl"]), mode="hybrid")
    except Exception as exc:  # noqa: BLE001 -- an unsupported architecture or a missing table is a reported miss
        miss = {"ms": None, "source": None, "error": f"static: {exc}", "quants": None}
        return {"TTFT": miss, "TPOT": miss}
    return {"TTFT": {"ms": out["ttft_ms"], "source": "hybrid", "error": None, "quants": out["quants"]},
            "TPOT": {"ms": out["tpot_ms"], "source": "hybrid", "error": None, "quants": out["quants"]}}


def scenario_rows(est, scenarios: dict[str, list[dict]], inventory: list[dict], systems_of: dict[str, tuple],
                  hf_ids: dict[str, str] | None = None) -> list[dict]:
    """One row per model x scenario x metric x system/backend/version present in the warehouse, with the
    scenario's parallelism, shape and the deployment's memory fit on that system."""
    rows = []
    for model, items in scenarios.items():
        if model not in systems_of:
            continue
        hf_id = (hf_ids or {}).get(model, model)
        names = model_names(hf_id)
        for i, sc in enumerate(items):
            static_kind = sc.get("kind") == "static"
            knobs = parallelism(sc["deploy"])
            if not static_kind:
                sc = {**sc, "ops": resolve_ops(sc, {**names, **knobs}, f"{model}[{i}] ({sc['name']})")}
            tables = {"gemm_perf"} if static_kind else {op_table(op["op"]) for op in sc["ops"]}
            cells = sorted(set.intersection(*(set(slices(inventory, t, systems_of[model])) for t in tables)))
            for cell in cells:
                base = {"model": model, "scenario": sc["name"], "system": cell[0], "backend": cell[1], "version": cell[2],
                        "parallelism": parallelism_label(knobs), **knobs, **shape(sc)}
                if static_kind:
                    priced = price_static(est, hf_id, sc, cell)
                    fit = memory_fit(hf_id, cell, sc, next(iter(priced.values()))["quants"])
                    rows += [{**base, "metric": metric, **{k: v for k, v in value.items() if k != "quants"}, **fit}
                             for metric, value in priced.items()]
                else:
                    rows.append({**base, "metric": PHASES[sc["phase"]], **price_scenario(est, sc, cell),
                                 **memory_fit(hf_id, cell, sc)})
    return rows


def token_sweep(est, scenarios: dict[str, list[dict]], inventory: list[dict], systems_of: dict[str, tuple],
                hf_ids: dict[str, str] | None = None) -> dict:
    """model -> priced points of its first operator scenario at SWEEP_TOKENS on every cell (for the plot)."""
    out = {}
    for model, items in scenarios.items():
        items = [sc for sc in items if sc.get("kind") != "static"]
        if not items or model not in systems_of:
            continue
        points = []
        for tokens in SWEEP_TOKENS:
            sc = {**items[0], "tokens": tokens}
            points += [{**r, "tokens": tokens} for r in scenario_rows(est, {model: [sc]}, inventory, systems_of, hf_ids)
                       if r["ms"] is not None]
        out[model] = {"scenario": items[0]["name"], "points": points}
    return out


def gate(current: list[dict], previous: list[dict] | None, warn_pct: float, fail_pct: float) -> dict:
    """Compare predictions with the previously stored ones: ok / warn / fail / new / lost per row."""
    before = {tuple(r.get(k) for k in GATE_KEY): r["ms"] for r in previous or []}
    rows = []
    for r in current:
        old = before.get(tuple(r.get(k) for k in GATE_KEY))
        if previous is None or old is None:
            verdict, delta = ("new" if r["ms"] is not None else "miss"), None
        elif r["ms"] is None:
            verdict, delta = "lost", None
        else:
            delta = 100.0 * (r["ms"] - old) / old
            verdict = "fail" if abs(delta) > fail_pct else "warn" if abs(delta) > warn_pct else "ok"
        rows.append({**r, "previous_ms": old, "delta_pct": delta, "verdict": verdict})
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in ("ok", "warn", "fail", "lost", "new", "miss")}
    status = "no baseline" if previous is None else "fail" if counts["fail"] or counts["lost"] else "pass"
    return {"status": status, "warn_pct": warn_pct, "fail_pct": fail_pct, "counts": counts, "rows": rows}


def estimates_frame(report: dict, *, priced_at: str, priced_from: dict, compared_with: int | None) -> pl.DataFrame:
    """The `estimates` table's rows for one pricing: gated scenario rows, then the sweep points."""
    g = report["gate"]
    run = {"gate_status": g["status"], "warn_pct": g["warn_pct"], "fail_pct": g["fail_pct"],
           "compared_with": compared_with, "previous_priced_at": report["as_of_previous"], "priced_at": priced_at,
           "priced_from": json.dumps(priced_from, sort_keys=True)}
    rows = [{**r, "kind": "scenario", "hf_model": report["models"][r["model"]]} for r in g["rows"]]
    rows += [{**p, "kind": "sweep", "hf_model": report["models"][model]}
             for model, sweep in report["sweeps"].items() for p in sweep["points"]]
    return pl.DataFrame([{**{c: r.get(c) for c in ESTIMATES_SCHEMA}, **run, "seq": i} for i, r in enumerate(rows)],
                        schema=ESTIMATES_SCHEMA)


def table_versions(wh) -> dict[str, int | None]:
    """The warehouse table versions an estimate reads: `batches` (one commit per ingest) and every curated table."""
    return {"batches": wh.table_version("batches"),
            **{f"curated/{t}": wh.table_version(t, curated=True) for t in wh.curated_tables()}}


@dataclass(frozen=True)
class ScenarioModel:
    """What pricing needs of a model: its HF id and the systems its lanes cover (the ledger's lane spec knows)."""

    hf_id: str
    systems: tuple[str, ...]


def refresh_estimates(root: Path, scenarios_path: Path, models: dict[str, ScenarioModel], gate_cfg: dict) -> dict:
    """Price the configured models' scenarios, gate them against the stored estimates and store them as the
    next version of the `estimates` table; returns the report (with the table `version` written)."""
    from perfledger.estimator.data.sources import WarehouseSource
    from perfledger.estimator.session import Estimator
    from perfledger.warehouse.inventory import curated_inventory
    from perfledger.warehouse.lock import run_lock
    from perfledger.warehouse.store import Warehouse

    wh = Warehouse(root)
    scenarios = load_scenarios(scenarios_path)
    wanted = {name: scenarios[name] for name in models if name in scenarios}
    systems_of = {name: model.systems for name, model in models.items()}
    hf_ids = {name: model.hf_id for name, model in models.items()}
    inventory = curated_inventory(wh)
    est = Estimator(WarehouseSource(root))
    current = scenario_rows(est, wanted, inventory, systems_of, hf_ids)
    sweeps = token_sweep(est, wanted, inventory, systems_of, hf_ids)
    with run_lock(wh.root, purpose="estimates"):
        compared_with = wh.table_version(ESTIMATES_TABLE)
        previous, stamp = None, None
        if compared_with is not None:
            stored = wh.read_table(ESTIMATES_TABLE, as_of=compared_with).filter(pl.col("kind") == "scenario")
            if "parallelism" not in stored.columns:  # stored before scenarios named their parallelism
                stored = stored.with_columns(parallelism=pl.lit(None, pl.String))
            previous = stored.filter(pl.col("ms").is_not_null()).select(*GATE_KEY, "ms").to_dicts()
            stamp = stored["priced_at"][0] if stored.height else None
        report = {"as_of_previous": stamp, "models": {name: models[name].hf_id for name in wanted},
                  "gate": gate(current, previous, gate_cfg["warn_pct"], gate_cfg["fail_pct"]), "sweeps": sweeps}
        priced_at = datetime.now(UTC).isoformat(timespec="microseconds")
        frame = estimates_frame(report, priced_at=priced_at, priced_from=table_versions(wh), compared_with=compared_with)
        version = wh.write_table(ESTIMATES_TABLE, frame, mode="overwrite")
    return {**report, "version": version}
