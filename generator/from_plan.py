"""A planned deployment (one row of `perfledger plan`) as the unified deployment YAML the generator renders.

Why: the planner's answer is only useful once it runs; the rows name the layout, batch and worker counts, and
this turns one into the same document a person would write (then `api.render_document` renders it), so the
artifacts of a plan go through the generator's validation and rules like any hand-written YAML. A replica
is repeated to fill the GPU budget (`replicas`), so a disagg row of x prefill + y decode workers becomes
x · replicas prefill and y · replicas decode workers, as 0.12.0's generated configs count them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _worker(side: dict[str, Any]) -> dict[str, Any]:
    """One role's Workers block from a row side (tp, pp, dp, moe_tp, moe_ep, batch)."""
    out = {"tensor_parallel_size": int(side["tp"]), "pipeline_parallel_size": int(side["pp"]),
           "max_batch_size": int(side["batch"])}
    if int(side.get("dp", 1)) > 1:
        out.update(enable_attention_dp=True, data_parallel_size=int(side["dp"]))
    if int(side.get("moe_tp", 1)) > 1 or int(side.get("moe_ep", 1)) > 1:
        out.update(moe_tensor_parallel_size=int(side["moe_tp"]), moe_expert_parallel_size=int(side["moe_ep"]))
    return out


def deployment(row: dict[str, Any], *, mode: str, model: str, backend: str, isl: int, osl: int,
               is_moe: bool = False) -> dict[str, Any]:
    """The unified deployment document for one plan row of `mode` (agg | disagg)."""
    replicas = max(int(row.get("replicas", 1)), 1)
    doc: dict[str, Any] = {"backend": backend, "ServiceConfig": {"model_path": model},
                           "SlaConfig": {"isl": int(isl), "osl": int(osl), "ttft": float(row["ttft_ms"]),
                                         "tpot": float(row["tpot_ms"])},
                           "ModelConfig": {"is_moe": bool(is_moe)}}
    if mode == "agg":
        doc["WorkerConfig"] = {"agg_workers": replicas}
        doc["Workers"] = {"agg": _worker(row)}
    elif mode == "disagg":
        doc["WorkerConfig"] = {"prefill_workers": int(row["prefill"]["workers"]) * replicas,
                               "decode_workers": int(row["decode"]["workers"]) * replicas}
        doc["Workers"] = {"prefill": _worker(row["prefill"]), "decode": _worker(row["decode"])}
    else:
        raise ValueError(f"plan mode {mode!r}: agg or disagg")
    return doc


def render_row(out: Path, relative: Path, row: dict[str, Any], *, mode: str, model: str, backend: str, isl: int,
               osl: int, is_moe: bool = False, where: str = "plan", held_versions: dict[str, list[str]] | None = None
               ) -> tuple[list[str], list[str]]:
    """Render one plan row's artifacts (engine args, run scripts, manifests) into out/relative; (file names, warnings).
    A row the generator cannot state is not rendered: no folder is made for it, and an earlier row's artifacts
    there are removed (they would pass for this row's). `held_versions` picks the release as for a hand-written YAML
    naming no version (api.build_document)."""
    from perfledger.generator.api import build_document, render_document
    from perfledger.generator.outdir import write_output
    from perfledger.safe_io import make_folders

    sides = [row[s] for s in ("prefill", "decode") if s in row] if mode == "disagg" else [row]
    if any(int(side.get("cp", 1)) > 1 for side in sides):  # a layout the unified YAML cannot state yet
        return [], ["context parallelism (cp > 1) has no engine flag in the generator's mapping; not rendered",
                    *clear_rendered(out / relative)]
    doc = build_document(deployment(row, mode=mode, model=model, backend=backend, isl=isl, osl=osl, is_moe=is_moe), [],
                         held_versions=held_versions)
    rendered = render_document(doc, where)
    _, cleanup = write_output(make_folders(out, relative), rendered.files)
    return sorted(rendered.files), [*rendered.warnings, *cleanup]


def clear_rendered(folder: Path) -> list[str]:
    """Remove what an earlier plan row rendered into `folder` (its generator manifest names the files), so no stale
    artifacts pass for the current answer; the cleanup's warnings."""
    from perfledger.generator.outdir import MANIFEST, write_output

    return write_output(folder, {})[1] if (folder / MANIFEST).is_file() else []
