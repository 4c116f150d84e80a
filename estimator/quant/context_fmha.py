"""Context FMHA by data: whether a checkpoint's inferred fp8 FMHA has context-attention data, else bfloat16.

0.12.0's planner and its `cli estimate` settle the FMHA dtype against the perf tables rather than a hand-written
list: DeepSeek-V3 on h200 sglang 0.5.14 holds context MLA at mla_dtype bfloat16 only, so its fp8-inferred FMHA
is priced at bfloat16 there, and a support-matrix row that would otherwise FAIL on "no fp8 rows" PASSes. Which
table a model reads and which column names the FMHA dtype are data (`context_fmha.yaml`); this module reads them.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from perfledger.estimator.errors import NoDataError, UnsupportedModelError
from perfledger.safe_io import data_yaml

RULES_YAML = Path(__file__).with_name("context_fmha.yaml")
KV_COLUMN = "kv_cache_dtype"


@cache
def rules() -> dict:
    return data_yaml(RULES_YAML)


def context_op(architecture: str | None, backend: str) -> str:
    """The context table family the model's prefill attention reads on `backend` (context_fmha.yaml)."""
    doc = rules()
    per_backend = doc["architectures"].get(architecture) or {}
    return per_backend.get(backend, per_backend.get("default", doc["default_op"]))


def fmha_modes(est, system: str, backend: str, version: str, op: str, kv: str, *, shared: bool) -> list[str]:
    """FMHA dtypes `op`'s tables hold at KV dtype `kv` over every kernel lane (shared: with the donor and earlier
    versions' rows a SILICON / HYBRID query may read); [] when no table has rows (no information)."""
    import polars as pl

    aliases = rules()["dtype_aliases"]
    modes: set[str] = set()
    for table, fmha_column in rules()["ops"][op]:
        try:
            rows = est.table(system, backend, version, table, shared=shared)
        except NoDataError:
            continue
        held = rows.filter(pl.col(KV_COLUMN).replace(aliases) == kv)[fmha_column].replace(aliases)
        modes.update(held.drop_nulls().unique().to_list())
    return sorted(modes)


def resolve_by_data(quants: dict[str, dict[str, str]], architecture: str | None, est, system: str, backend: str,
                    version: str, *, shared: bool) -> dict[str, dict[str, str]]:
    """`quants` with the context FMHA the data supports; a fallback says why in the fmha entry's `note`. A flagged
    fp8 FMHA without fp8 data is refused by name, as 0.12.0 refuses it (only an inferred one falls back)."""
    fmha = quants["fmha"]
    if fmha["quant"] != "fp8":
        return quants
    op = context_op(architecture, backend)
    modes = fmha_modes(est, system, backend, version, op, quants["kv"]["quant"], shared=shared)
    if not modes or "fp8" in modes:
        return quants
    where = f"{system}/{backend}/{version} at kv {quants['kv']['quant']}"
    if fmha["source"] == "flag":
        raise UnsupportedModelError(f"--fmha-quant fp8 has no {op} data for {where} (it holds {', '.join(modes)}); "
                                    "pass --fmha-quant bfloat16, or leave it unset to let the data decide")
    if "bfloat16" not in modes:
        return quants
    note = (f"fmha fp8 (inferred from the checkpoint) has no {op} data for {where}: priced at bfloat16 FMHA, "
            "conservative if the engine runs fp8 attention")
    return {**quants, "fmha": {"quant": "bfloat16", "source": fmha["source"], "note": note}}
