"""The search space: parallel configurations (tp, pp, attention-dp, moe_tp, moe_ep, cp) of one worker, as data.

space.yaml holds the candidate lists 0.12.0's default search enumerates per role, model kind and system, and
the backend exclusions; `enumerate_parallel` applies them with the GPU budget and the model's context-parallel
backends (models.yaml `context_parallel`); `check_node_ep` refuses EP across
nodes unless the layout is priced through the MoE all-to-all (agg and disagg skip and name such configurations, as
0.12.0 does without DeepEP all-to-all data).
`check_moe_width` is the MoE width rule every priced deployment obeys (0.12.0 refuses a mismatched width; so do
`estimate static` and the plans).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from itertools import product
from pathlib import Path

from perfledger.estimator.errors import EstimatorError
from perfledger.safe_io import data_yaml

SPACE_YAML = Path(__file__).with_name("space.yaml")
DIMS = ("tp", "pp", "dp", "moe_tp", "moe_ep", "cp")


class ParallelWidthError(EstimatorError):
    """A MoE deployment whose expert width moe_tp × moe_ep differs from the attention width tp × dp × cp."""


@dataclass(frozen=True, order=True)
class Parallel:
    """One worker's parallelism; `dp` is attention data parallelism (each rank holds its own batch), `cp` context
    parallelism (each rank prefills a share of every prompt; decode runs without it)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    moe_tp: int = 1
    moe_ep: int = 1
    cp: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def label(self) -> str:
        """0.12.0's `parallel` column, e.g. tp4pp1dp1etp1ep1, tp1pp1dp1etp1ep1cp2."""
        return f"tp{self.tp}pp{self.pp}dp{self.dp}etp{self.moe_tp}ep{self.moe_ep}" + (f"cp{self.cp}" if self.cp > 1 else "")

    def as_dict(self) -> dict[str, int]:
        return {d: getattr(self, d) for d in DIMS}


def check_moe_width(tp: int, dp: int, moe_tp: int, moe_ep: int, *, cp: int = 1, where: str = "deployment") -> None:
    """moe_tp × moe_ep must equal tp × dp × cp (the GPUs the attention side spans), else there is no such deployment."""
    if min(tp, dp, moe_tp, moe_ep, cp) < 1:
        raise ParallelWidthError(f"{where}: tp, attention-dp, moe_tp, moe_ep and cp must be >= 1")
    if moe_tp * moe_ep != tp * dp * cp:
        span = f"tp {tp} x attention-dp {dp}" + (f" x cp {cp}" if cp > 1 else "")
        raise ParallelWidthError(f"{where}: MoE width moe_tp {moe_tp} x moe_ep {moe_ep} = {moe_tp * moe_ep} must equal "
                                 f"{span} = {tp * dp * cp}")


def context_parallel_alone(tp: int, dp: int, cp: int) -> bool:
    """Context parallelism runs only on layouts without attention TP or DP (the only ones 0.12.0 prices)."""
    return cp == 1 or tp * dp == 1


def check_node_ep(p: Parallel, gpus_per_node: int, large_ep: bool = False) -> None:
    """Expert parallelism wider than a node: priced only through the MoE all-to-all (`large_ep`: the layout switched,
    plan/large_ep.py); 0.12.0 refuses it without DeepEP all-to-all data."""
    if p.moe_ep > gpus_per_node and not large_ep:
        raise ParallelWidthError(f"moe_ep {p.moe_ep} spans nodes of {gpus_per_node} GPUs: cross-node EP needs "
                                 "all-to-all data")


@cache
def _doc(path: Path = SPACE_YAML) -> dict:
    return data_yaml(path)


def candidates(role: str, moe: bool, system: str) -> dict[str, list[int]]:
    """The candidate lists of one role and model kind on one system (space.yaml)."""
    roles = _doc()["roles"]
    if role not in roles:
        raise EstimatorError(f"{SPACE_YAML.name}: no role {role!r}; known: {', '.join(roles)}")
    kind = roles[role]["moe" if moe else "dense"]
    return (kind.get("systems") or {}).get(system, kind["default"])


def enumerate_parallel(role: str, *, moe: bool, backend: str, system: str, total_gpus: int,
                       context_parallel: bool = False) -> list[Parallel]:
    """Every worker configuration of the role that 0.12.0 sweeps, in its order (tp, pp, dp, moe_tp, moe_ep, cp).

    context_parallel: the model prices context parallelism on this backend (models.yaml `context_parallel`); its cp
    list applies then, to layouts without attention TP or DP (the only CP deployments 0.12.0 prices)."""
    lists = {**candidates(role, moe, system), "cp": _doc()["cp"][role] if context_parallel else [1]}
    sizes = {n for n in lists["num_gpu"] if n <= total_gpus}
    exclusions = _doc()["exclusions"].get(backend, [])
    out = []
    if not moe:
        return [Parallel(tp, pp, cp=cp) for tp, pp, cp in product(lists["tp"], lists["pp"], lists["cp"])
                if tp * pp * cp in sizes and context_parallel_alone(tp, 1, cp)]
    for dims in product(*(lists[d] for d in DIMS)):
        p = Parallel(*dims)
        if p.gpus not in sizes or p.moe_tp * p.moe_ep != p.tp * p.dp * p.cp or not context_parallel_alone(p.tp, p.dp, p.cp):
            continue
        if any(all(getattr(p, d) > 1 for d in rule) for rule in exclusions):
            continue
        out.append(p)
    return out


def refusal_reason(layouts: str, refused: list[str] | tuple[str, ...]) -> str:
    """Why a search has no candidate when the estimator refused its layouts (`refused`: "label: why" each): how many,
    and the distinct whys, two of them and a count of the rest."""
    whys = list(dict.fromkeys(m.split(": ", 1)[-1] for m in refused))
    return (f"refused: the estimator prices no {layouts} ({len(refused)} refused): "
            + "; ".join(whys[:2]) + (f" [+{len(whys) - 2} more]" if len(whys) > 2 else ""))
