"""Our own support matrix: model x system x backend x version x mode.

`search_rows` (what `matrix build` runs) gives the reference's semantics: the deployment search on the row's
GPU budget decides PASS / HYBRID_PASS / FAIL (ledger/matrix/decide.py). `build_rows` is the earlier one-replica
heuristic, kept as a per-op diagnostic of which layer op a cell's data cannot price: every op the model's
layers need (ledger/matrix/needs.py) is asked SILICON first, then HYBRID; PASS when all are SILICON,
HYBRID_PASS (Source = the weakest tier used) when some need a transfer, FAIL naming the first unpriced op and
its table/slice, and FAIL when the model does not fit one GPU of the rules.yaml `memory_fit` replica. Both
apply the hardware rules of rules.yaml first (HW_INCOMPATIBLE).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import product
from typing import TYPE_CHECKING

import polars as pl

from perfledger.ledger.matrix.choices import resolve_choice
from perfledger.ledger.matrix.needs import Choice, Need, derive_needs, load_config, load_needs, model_dims
from perfledger.ledger.matrix.rules import MatrixRules, load_rules
from perfledger.ledger.specs import ModelSpec, OpNeed

if TYPE_CHECKING:
    from perfledger.estimator.plan.feasible import Feasibility

Estimate = Callable[[str, pl.DataFrame, str], pl.DataFrame]  # (op, queries, mode) -> frame with `source`
NO_OP_MODEL = "the estimator has no {op!r} op model"


def combinations(partitions: pl.DataFrame, spec: ModelSpec, rules: MatrixRules) -> list[tuple[str, str, str]]:
    """(system, backend, version) of the warehouse on the model's systems, for the matrix's backends."""
    keep = partitions.filter(pl.col("system").is_in(list(spec.systems)) & pl.col("backend").is_in(list(rules.backends)))
    return sorted(keep.select("system", "backend", "version").unique().iter_rows())


def required_dtypes(spec: ModelSpec, rules: MatrixRules | None = None) -> list[str]:
    """Natively needed dtypes: the spec's `requires` plus those its quant labels imply (rules order)."""
    rules = rules or load_rules()
    implied = {rules.quant_dtypes[q] for q in spec.matrix.quant.values() if q in rules.quant_dtypes}
    wanted = set(spec.matrix.requires) | implied
    return [d for d in rules.hardware if d in wanted] + sorted(wanted - set(rules.hardware))


def hw_gap(spec: ModelSpec, system: str, flops: dict[str, float], rules: MatrixRules | None = None) -> str | None:
    """The HW_INCOMPATIBLE reason, or None: a needed dtype needs positive tensor-core FLOP/s (or a listed
    software fallback on that system), and the system's kernels must run the model's quant labels."""
    rules = rules or load_rules()
    missing = [d for d in required_dtypes(spec, rules)
               if not flops.get(d) and system not in rules.hardware.get(d, {}).get("software_fallback", ())]
    if missing:
        return f"{system} has no {'/'.join(d.upper() for d in missing)} tensor cores, required by {spec.model}"
    quant = {**load_needs()["quant_defaults"], **spec.matrix.quant}
    blocked = [f"{role} quant {quant[role]}" for role, labels in rules.unsupported_quants.get(system, {}).items()
               if quant.get(role) in labels]
    if blocked:
        return f"{system} kernels do not support {', '.join(blocked)}, required by {spec.model}"
    return None


def memory_gap(spec: ModelSpec, system: str, backend: str, version: str = "",
               rules: MatrixRules | None = None) -> str | None:
    """The FAIL reason when the model does not fit one GPU of the rules' `memory_fit` replica (total over
    capacity, or KV over the backend's KV budget), else None. A model the memory model cannot size is a FAIL
    that says so, never a pass by omission."""
    from perfledger.estimator.errors import EstimatorError
    from perfledger.estimator.models.memory import GIB, deployment_memory

    rules = rules or load_rules()
    fit = rules.memory_fit
    if not fit:
        return None
    quant = {**load_needs()["quant_defaults"], **spec.matrix.quant}
    shard = f"tp{fit['tp']}/moe_tp{fit['moe_tp']}/moe_ep{fit['moe_ep']}"
    try:
        mem = deployment_memory(spec.model, system, backend, tp=fit["tp"], moe_tp=fit["moe_tp"], moe_ep=fit["moe_ep"],
                                quants=quant, batch=fit["batch"], isl=fit["isl"], osl=fit["osl"],
                                tokens=fit["batch"] * (fit["isl"] - fit["prefix"]), version=version)
    except EstimatorError as exc:
        return f"memory ({shard}): cannot size {spec.model}: {exc}"
    if mem.fits and mem.kv_fits:
        return None
    def g(b):
        return f"{b / GIB:.2f}"
    head = (f"memory ({shard}, batch {fit['batch']}, isl {fit['isl']} + osl {fit['osl']}): {spec.model} needs "
            f"{g(mem.total)} GiB per GPU (weights {g(mem.weights)}, kv {g(mem.kv)}, activations {g(mem.activations)}, "
            f"runtime {g(mem.nccl + mem.others)}), {system} has {g(mem.capacity)} GiB")
    if not mem.fits:
        return f"{head}: model does not fit in GPU memory"
    return f"{head}; {backend} {version} leaves a KV budget of {g(mem.kv_budget)} GiB: KV cache does not fit"


def need_queries(need: OpNeed, system: str, backend: str, version: str) -> pl.DataFrame:
    """An explicit spec need's value grid (cross product) with its slice keys and the cell's keys."""
    cols = list(need.values)
    grid = pl.DataFrame([dict(zip(cols, combo, strict=True)) for combo in product(*need.values.values())])
    return grid.with_columns(system=pl.lit(system), backend=pl.lit(backend), version=pl.lit(version),
                             **{k: pl.lit(v) for k, v in need.query.items()})


def weakest(tiers: list[str], order: tuple[str, ...]) -> str:
    """The least confident provenance tier among those used (rules' source_tiers order)."""
    rank = {t: i for i, t in enumerate(order)}
    return max(tiers, key=lambda t: rank.get(t, len(order)))


def price(estimate: Estimate, op: str, queries: pl.DataFrame, order: tuple[str, ...]) -> tuple[str | None, str | None]:
    """(tier, None) when priced, (None, reason) when not: SILICON first, then HYBRID. The tier is the
    answer's own `source` (a SILICON answer may be a roofline alone: tier `sol`, never a PASS)."""
    from perfledger.estimator.errors import EstimatorError

    try:
        out = estimate(op, queries, "silicon")
        return weakest(out["source"].unique().to_list(), order), None
    except EstimatorError as exc:
        first = str(exc)
    try:
        out = estimate(op, queries, "hybrid")
    except EstimatorError as exc:
        second = str(exc)
        return None, second if second.startswith(first) else f"{first}; hybrid: {second}"
    return weakest(out["source"].unique().to_list(), order), None


@dataclass
class Pricer:
    """Prices needs for one build, remembering answers (agg and disagg share most queries)."""

    estimate: Estimate
    known_ops: frozenset[str]
    order: tuple[str, ...]
    memo: dict = field(default_factory=dict)

    def need(self, need: Need, cell: tuple[str, str, str]) -> tuple[str | None, str | None]:
        label = f"{need.name} ({need.phase}, {need.table})"
        if need.op not in self.known_ops:
            return None, f"{label}: {NO_OP_MODEL.format(op=need.op)}"
        key = (need.op, need.query, cell)
        if key not in self.memo:
            q = pl.DataFrame([{"system": cell[0], "backend": cell[1], "version": cell[2], **dict(need.query)}])
            self.memo[key] = price(self.estimate, need.op, q, self.order)
        tier, err = self.memo[key]
        return tier, None if tier else f"{label}: {err}"

    def choice(self, choice: Choice, cell: tuple[str, str, str]) -> tuple[str | None, str | None]:
        """An any_of need: the first option the cell's data prices (ledger/matrix/choices.py)."""
        tier, err, _ = resolve_choice(choice, cell[1], lambda n: self.need(n, cell), lambda t: weakest(t, self.order))
        return tier, err

    def any(self, need: Need | Choice, cell: tuple[str, str, str]) -> tuple[str | None, str | None]:
        return self.choice(need, cell) if isinstance(need, Choice) else self.need(need, cell)

    def explicit(self, need: OpNeed, cell: tuple[str, str, str]) -> tuple[str | None, str | None]:
        if need.op not in self.known_ops:
            return None, f"{need.op}: {NO_OP_MODEL.format(op=need.op)}"
        tier, err = price(self.estimate, need.op, need_queries(need, *cell), self.order)
        return tier, None if tier else f"{need.op}: {err}"


def lane_versions(spec: ModelSpec, lane_id: str, cell: tuple[str, str, str]) -> list[str]:
    """Versions whose rows can serve a lane need: the cell's own, then the lane's expected (pinned)
    versions of that backend on that system -- a family pinned to a branch build serves every version."""
    system, backend, version = cell
    pinned = [e.version for e in spec.lane(lane_id).expect if e.backend == backend and system in e.systems]
    return list(dict.fromkeys([version, *pinned]))


def model_needs(spec: ModelSpec, modes: tuple[str, ...]) -> dict[str, list[Need | Choice]]:
    """Per mode, the ops the model's layers need (empty when the spec sets `matrix.derive: false`)."""
    if not spec.matrix.derive:
        return {m: [] for m in modes}
    doc = load_needs()
    config, source = load_config(spec.model)
    dims = model_dims(config, source, doc["dims"])
    return {m: derive_needs(spec.architecture, dims, spec.matrix.quant, m, doc) for m in modes}


def judge(spec: ModelSpec, cell: tuple[str, str, str], needs: list[Need | Choice], pricer: Pricer,
          lane_rows: dict[tuple, int]) -> tuple[str, str, str]:
    """(Status, ErrMsg, Source) of one system/backend/version/mode (hardware already checked)."""
    tiers, errors, unpriced = [], [], []
    for need in needs:
        tier, error = pricer.any(need, cell)
        tiers.append(tier) if tier else (errors.append(error), unpriced.append(f"{need.name}/{need.phase}"))
    for op_need in spec.matrix.ops:
        tier, error = pricer.explicit(op_need, cell)
        tiers.append(tier) if tier else (errors.append(error), unpriced.append(op_need.op))
    for lane_id in spec.matrix.lanes:
        versions = lane_versions(spec, lane_id, cell)
        if any(lane_rows.get((lane_id, cell[0], cell[1], v), 0) > 0 for v in versions):
            tiers.append("silicon")
        else:
            errors.append(f"lane {lane_id} ({spec.lane(lane_id).table}): no collected rows for {cell[0]}/{cell[1]} "
                          f"at {', '.join(versions)}")
            unpriced.append(f"lane {lane_id}")
    if errors:
        more = f" [+{len(unpriced) - 1} more unpriced: {', '.join(unpriced[1:])}]" if len(unpriced) > 1 else ""
        return "FAIL", errors[0] + more, ""
    tier = weakest(tiers, pricer.order) if tiers else "silicon"
    return ("PASS", "", "silicon") if tier == "silicon" else ("HYBRID_PASS", "", tier)


Outcome = Callable[[tuple[str, str, str], str, str], "Feasibility"]  # (cell, mode, database mode) -> answer


def plan_command(model: str, cell: tuple[str, str, str], mode: str, database_mode: str, question: dict) -> str:
    """The `perfledger plan` line that replays a row's search (the reference's Command runs `cli default`)."""
    q = question
    return (f"perfledger plan --model {model} --total-gpus {q['total_gpus']} --system {cell[0]} --backend {cell[1]} "
            f"--version {cell[2]} --isl {q['isl']} --osl {q['osl']} --prefix {q['prefix']} --ttft {q['ttft']} "
            f"--tpot {q['tpot']} --mode {mode} --top-n 1 --database-mode {database_mode}")


def search_rows(spec: ModelSpec, cells: list[tuple[str, str, str]], outcome: Outcome,
                flops_by_system: dict[str, dict[str, float]], rules: MatrixRules | None = None,
                on_cell: Callable[[], None] | None = None) -> pl.DataFrame:
    """Matrix rows with the reference's semantics: per cell and mode the deployment search's SILICON answer, then
    HYBRID where it could differ, graded by ledger/matrix/decide.py; hardware rules first (HW_INCOMPATIBLE).
    `outcome(cell, mode, database_mode)` runs the search (api.py: estimator/plan/feasible.py)."""
    from perfledger.ledger.matrix.decide import decide, needs_hybrid

    rules = rules or load_rules()
    rows = []
    for cell in cells:
        gap = hw_gap(spec, cell[0], flops_by_system.get(cell[0], {}), rules)
        for mode in rules.modes:
            database_mode = "silicon"
            if gap:
                status, err, source = "HW_INCOMPATIBLE", gap, ""
            else:
                silicon = outcome(cell, mode, "silicon")
                hybrid = outcome(cell, mode, "hybrid") if needs_hybrid(silicon) else None
                status, err, source = decide(silicon, hybrid, rules.source_tiers)
                database_mode = "hybrid" if hybrid is not None and hybrid.found else "silicon"
            command = plan_command(spec.model, cell, mode, database_mode, rules.search)
            values = (spec.model, spec.architecture, *cell, mode, status, err, command, source)
            rows.append(dict(zip(rules.columns, values, strict=True)))
        if on_cell:
            on_cell()
    return pl.DataFrame(rows, schema=dict.fromkeys(rules.columns, pl.String))


def build_rows(spec: ModelSpec, cells: list[tuple[str, str, str]], estimate: Estimate,
               flops_by_system: dict[str, dict[str, float]], lane_rows: dict[tuple, int],
               rules: MatrixRules | None = None, known_ops: frozenset[str] | None = None,
               on_cell: Callable[[], None] | None = None) -> pl.DataFrame:
    """Matrix rows (the 10 support-matrix columns), both modes for every combination; `on_cell()` after each."""
    from perfledger.estimator.ops.registry import registry

    rules = rules or load_rules()
    pricer = Pricer(estimate, known_ops if known_ops is not None else frozenset(registry()), rules.source_tiers)
    needs = model_needs(spec, rules.modes)
    rows, memory = [], {}
    for cell in cells:
        command = (f"perfledger matrix build {spec.model} --system {cell[0]} --backend {cell[1]} --version {cell[2]} "
                   "--no-store")
        gap = hw_gap(spec, cell[0], flops_by_system.get(cell[0], {}), rules)
        for mode in rules.modes:
            status, err, source = ("HW_INCOMPATIBLE", gap, "") if gap else judge(spec, cell, needs[mode], pricer, lane_rows)
            if status in rules.pass_statuses:
                if cell not in memory:
                    memory[cell] = memory_gap(spec, *cell, rules)
                status, err, source = ("FAIL", memory[cell], "") if memory[cell] else (status, err, source)
            values = (spec.model, spec.architecture, *cell, mode, status, err, command, source)
            rows.append(dict(zip(rules.columns, values, strict=True)))
        if on_cell:
            on_cell()
    return pl.DataFrame(rows, schema=dict.fromkeys(rules.columns, pl.String))
