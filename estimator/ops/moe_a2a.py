"""Large-EP MoE all-to-all (one dispatch / combine / prepare phase of DeepEP or TRT-LLM's all-to-all) over moe_a2a_perf.

A slice is the comm backend × phase × wire dtype × (ep, nodes) × the model shape (hidden, topk, experts) × the SM
budget; the token axis (tokens per attention rank: tokens // attention_tp) is a 1-D curve: exact, lerp inside,
proportional to tokens outside (fit/curve.py with a linear scale), as 0.12.0 reads it. The rows are moe_a2a_perf's, then
SGLang's legacy DeepEP tables adapted to its columns (`a2a_rows`, moe_a2a.yaml `legacy_tables`). The wire dtype reads its own
rows, else its alias (moe_a2a.yaml), else the backend-phase's only collected dtype; a multi-node query without rows
reads the one-node rows moe_a2a.yaml names (labelled xshape, 0.12.0's `estimated`). 0.12.0 prices it from measured
rows only: HYBRID is SILICON (no fallback), EMPIRICAL and SOL have no answer, so there is no roofline (sol NaN).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import polars as pl

from perfledger.estimator.errors import EmpiricalUnavailableError, NoDataError
from perfledger.estimator.fit.curve import eval_curve
from perfledger.estimator.ops.base import Answer, OpModel, tier_codes
from perfledger.safe_io import data_yaml

RULE_YAML = Path(__file__).with_name("moe_a2a.yaml")
SHAPE = {"hidden": "hidden_size", "topk": "topk", "experts": "num_experts", "sms": "sms"}


@cache
def rules(path: Path = RULE_YAML) -> dict:
    doc = data_yaml(Path(path)) or {}
    for key, kind in (("latency_to_ms", float), ("dtype_aliases", dict), ("node1_fallback", dict), ("legacy_tables", dict)):
        if not isinstance(doc.get(key), kind):
            raise ValueError(f"{path}: key {key!r} must be a {kind.__name__} (got {doc.get(key)!r})")
    return doc


A2A_COLUMNS = {"comm_backend": pl.String, "phase": pl.String, "comm_dtype": pl.String, "ep_size": pl.Int64,
               "node_num": pl.Int64, "hidden_size": pl.Int64, "topk": pl.Int64, "num_experts": pl.Int64, "sms": pl.Int64,
               "num_tokens": pl.Int64, "latency": pl.Float64}


def _legacy_rows(rows: pl.DataFrame, spec: dict) -> list[pl.DataFrame]:
    """One legacy DeepEP table's rows as moe_a2a rows, one frame per phase it times."""
    return [rows.select(pl.lit(spec["comm_backend"]).alias("comm_backend"), pl.lit(phase).alias("phase"),
                        pl.lit("default").alias("comm_dtype"), (pl.col("node_num") * spec["ep_per_node"]).alias("ep_size"),
                        "node_num", "hidden_size", pl.col("num_topk").alias("topk"), "num_experts",
                        (pl.col(cols["sms"]) if "sms" in cols else pl.lit(0)).alias("sms"),
                        pl.col("num_token").alias("num_tokens"), pl.sum_horizontal(cols["latency"]).alias("latency"))
            for phase, cols in spec["phases"].items()]


def a2a_rows(est, system: str, backend: str, version: str) -> pl.DataFrame:
    """The all-to-all rows of a slice (shared layer): moe_a2a_perf's first, then the legacy DeepEP tables'; a slice
    holding none of them is a NoDataError."""

    def build():
        parts, missing = [], []
        for table in ("moe_a2a_perf", *rules()["legacy_tables"]):
            try:
                rows = est.table(system, backend, version, table, shared=True)
            except NoDataError as exc:
                missing.append(str(exc))
                continue
            spec = rules()["legacy_tables"].get(table)
            parts += _legacy_rows(rows, spec) if spec else [rows.select(*A2A_COLUMNS)]
        if not parts:
            raise NoDataError("; ".join(missing))
        return pl.concat([part.cast(A2A_COLUMNS) for part in parts])

    return est.memo(("moe_a2a_rows", system, backend, version), build)


class MoeAllToAllModel(OpModel):
    name = "moe_a2a"
    tables = ("moe_a2a_perf", "wideep_deepep_normal_perf", "wideep_deepep_ll_perf")
    group_keys = ("system", "backend", "version", "comm_backend", "phase", "comm_dtype", "ep", "nodes", *SHAPE,
                  "attention_tp")
    value_columns = ("tokens",)
    defaults = {"comm_dtype": "default", "sms": 0, "attention_tp": 1}

    def sol(self, est, key, q):
        return np.full(q.height, np.nan)

    def _rows(self, est, key) -> pl.DataFrame:
        rows = a2a_rows(est, key["system"], key["backend"], key["version"])
        rows = rows.filter((pl.col("comm_backend") == key["comm_backend"]) & (pl.col("phase") == key["phase"]))
        if not rows.height:
            raise NoDataError(f"{self.table} {key['system']}/{key['backend']}/{key['version']}: no "
                              f"{key['comm_backend']}/{key['phase']} rows")
        return rows

    @staticmethod
    def _dtype(rows: pl.DataFrame, key) -> str:
        """The wire dtype whose rows price the query: its own, its alias, or the only one collected."""
        have = rows["comm_dtype"].unique().sort().to_list()
        asked = key["comm_dtype"]
        for dtype in (asked, rules()["dtype_aliases"].get(asked)):
            if dtype in have:
                return dtype
        if len(have) == 1:
            return have[0]
        raise NoDataError(f"moe_a2a {key['comm_backend']}/{key['phase']}: comm_dtype {asked!r} not collected (have {have})")

    def _scale(self, est, key, rows: pl.DataFrame) -> tuple[int, int, str]:
        """(ep, nodes) whose rows price the query and the tier label (xshape when borrowed from one node)."""
        ep, nodes = int(key["ep"]), int(key["nodes"])
        have = set(rows.select("ep_size", "node_num").unique().iter_rows())
        if (ep, nodes) in have:
            return ep, nodes, "silicon"
        fallback = rules()["node1_fallback"]
        if nodes > 1 and key["comm_backend"] in fallback["comm_backends"]:
            width = fallback["ep_by_framework"].get(key["backend"], est.spec(key["system"]).num_gpus_per_node)
            if (width, 1) in have:
                return width, 1, "xshape"
        raise NoDataError(f"moe_a2a {key['comm_backend']}/{key['phase']}: no rows at ep={ep}, nodes={nodes} "
                          f"(have {sorted(have)})")

    def _curve(self, est, key):
        def build():
            rows = self._rows(est, key)
            rows = rows.filter(pl.col("comm_dtype") == self._dtype(rows, key))
            ep, nodes, label = self._scale(est, key, rows)
            rows = rows.filter((pl.col("ep_size") == ep) & (pl.col("node_num") == nodes))
            for k, col in SHAPE.items():
                rows = rows.filter(pl.col(col) == int(key[k]))
            if not rows.height:
                where = ", ".join(f"{k}={key[k]}" for k in SHAPE)
                raise NoDataError(f"moe_a2a {key['comm_backend']}/{key['phase']} ep={ep} nodes={nodes}: no rows at {where}")
            rows = rows.unique("num_tokens", keep="first", maintain_order=True).sort("num_tokens")
            return rows["num_tokens"].to_numpy(), rows["latency"].to_numpy() * rules()["latency_to_ms"], label

        return est.memo((self.name, *(key[c] for c in self.group_keys)), build)

    def silicon(self, est, key, q):
        xs, lats, _ = self._curve(est, key)
        tokens = np.asarray(q["tokens"], dtype=np.int64) // int(key["attention_tp"])
        lat, miss = eval_curve(xs, lats, tokens, lambda t: np.asarray(t, dtype=np.float64))
        miss |= tokens <= 0  # nothing to anchor a zero-token message
        return np.where(miss, np.nan, lat), miss

    def evaluate(self, est, key, q, mode):
        if mode in ("empirical", "sol"):
            raise EmpiricalUnavailableError(f"{self.name}: 0.12.0 prices the all-to-all from measured rows only, not {mode}")
        answer: Answer = super().evaluate(est, key, q, "silicon")  # HYBRID: nothing to fall back to
        label = self._curve(est, key)[2]
        return Answer(answer.latency, answer.sol, tier_codes(label, q.height), answer.energy)
