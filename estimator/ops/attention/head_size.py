"""Attention head-size transfer: which head size a pool without samples borrows, and the util ratio it carries.

0.12.0 prices an uncollected head size from a reference head size's util (label xshape); the reference and
the per-backend prefill ratio tables are data (attention_headsize.yaml), measured against 0.12.0.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import polars as pl

from perfledger.estimator.ops.attention.kernel_lanes import LANE
from perfledger.safe_io import data_yaml

HEADSIZE_YAML = Path(__file__).with_name("attention_headsize.yaml")


@cache
def headsize_doc(path: Path = HEADSIZE_YAML) -> dict:
    doc = data_yaml(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("preferred"), int) or not isinstance(doc.get("context_ratio"), dict):
        raise ValueError(f"{path}: needs an integer `preferred` and a `context_ratio` map of backend -> {{head size: ratio}}")
    for backend, table in doc["context_ratio"].items():
        well_formed = (isinstance(table, dict) and len(table) >= 2
                       and all(isinstance(k, int) and float(v) > 0 for k, v in table.items()))
        if not well_formed:
            raise ValueError(f"{path}: context_ratio.{backend} needs >= 2 entries of integer head size -> positive ratio")
    return doc


def head_ratio(backend: str, head_size: int) -> float:
    """Context util ratio of a head size: the backend's table, linear in log2(head size), clamped at its ends."""
    tables = headsize_doc()["context_ratio"]
    if backend not in tables:
        raise KeyError(f"{HEADSIZE_YAML.name}: context_ratio has no table for backend {backend!r}")
    sizes = sorted(tables[backend])
    return float(np.interp(np.log2(head_size), np.log2(sizes), [float(tables[backend][s]) for s in sizes]))


def reference_head_size(model, est, key, mha: bool, shared: bool, window: int) -> tuple[int, str | None] | None:
    """(head size, lane) a pool without own samples at `window` borrows, None when no lane holds the pool.

    The lane is the first by name (0.12.0 walks its lane map in key order) holding the pool (quants, kv heads
    or MHA) at `window`, else at any window; the size is `preferred` when that lane holds it, else the lane's
    nearest size in log2 (own size included, ties to the smaller)."""
    df = est.table(key["system"], key["backend"], key["version"], model.table, shared=shared, dedupe=False)
    same = pl.col("num_heads") == pl.col("num_key_value_heads")
    df = df.filter(same if mha else ~same & (pl.col("num_key_value_heads") == int(key["kv_heads"])))
    for col, value in model.quant_filters(key).items():
        df = df.filter(pl.col(col) == value)
    if not df.height:
        return None
    lane = None
    if LANE in df.columns:
        at_window = df.filter(pl.col("window_size") == window)
        lane = min((at_window if at_window.height else df)[LANE].unique().to_list())
        df = df.filter(pl.col(LANE) == lane)
    sizes = sorted(set(df["head_dim"].to_list()))
    preferred = headsize_doc()["preferred"]
    own = int(key["head_dim"])
    return (preferred if preferred in sizes else min(sizes, key=lambda s: (abs(np.log2(s / own)), s))), lane
