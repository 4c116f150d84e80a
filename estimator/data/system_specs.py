"""System specs (memory bandwidth, tensor-core FLOP/s, interconnect) from the public system YAMLs."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from perfledger import settings
from perfledger.estimator.errors import MissingFlopsError, UnknownSystemError
from perfledger.safe_io import data_yaml


@dataclass(frozen=True)
class SystemSpec:
    """One GPU system: rates in bytes/s and FLOP/s, latencies in seconds."""

    name: str
    mem_bw: float
    mem_bw_scaling: float
    mem_const_latency: float
    flops: dict[str, float]
    num_gpus_per_node: int
    intra_node_bw: float
    inter_node_bw: float
    num_gpus_per_rack: int | None
    inter_rack_bw: float | None
    p2p_latency: float
    nccl_version: str
    source: str
    sm_version: int | None = None  # the GPU's compute capability x 10 (90 Hopper, 100+ Blackwell), when the file says

    def tc_flops(self, dtype: str) -> float:
        """Peak tensor-core FLOP/s for a compute dtype; no silent fallback to bf16."""
        value = self.flops.get(dtype)
        if value is None or value <= 0:
            raise MissingFlopsError(f"{self.source}: gpu.{dtype}_tc_flops missing or non-positive")
        return value

    def p2p_bw(self, num_gpus: int) -> float:
        """Per-GPU bandwidth of a collective over num_gpus: node, then rack, then inter-rack."""
        if num_gpus <= self.num_gpus_per_node:
            return self.intra_node_bw
        if self.num_gpus_per_rack is None or num_gpus <= self.num_gpus_per_rack:
            return self.inter_node_bw
        return self.inter_rack_bw or self.inter_node_bw


def _require(doc: dict, path: Path, *keys: str):
    node = doc
    for i, key in enumerate(keys):
        if not isinstance(node, dict) or key not in node:
            raise ValueError(f"{path}: missing key {'.'.join(keys[: i + 1])}")
        node = node[key]
    return node


def parse_spec(path: Path, name: str) -> SystemSpec:
    """Parse one system YAML; a missing required key is an error naming file and key."""
    doc = data_yaml(path)
    gpu, node = _require(doc, path, "gpu"), _require(doc, path, "node")
    flops = {k[: -len("_tc_flops")]: float(v) for k, v in gpu.items() if k.endswith("_tc_flops")}
    return SystemSpec(
        name=name,
        mem_bw=float(_require(doc, path, "gpu", "mem_bw")),
        mem_bw_scaling=float(gpu.get("mem_bw_empirical_scaling_factor", 1.0)),
        mem_const_latency=float(gpu.get("mem_empirical_constant_latency", 0.0)),
        flops=flops,
        num_gpus_per_node=int(_require(doc, path, "node", "num_gpus_per_node")),
        intra_node_bw=float(_require(doc, path, "node", "intra_node_bw")),
        inter_node_bw=float(_require(doc, path, "node", "inter_node_bw")),
        num_gpus_per_rack=node.get("num_gpus_per_rack"),
        inter_rack_bw=node.get("inter_rack_bw"),
        p2p_latency=float(node.get("p2p_latency", 0.0)),
        nccl_version=str(_require(doc, path, "misc", "nccl_version")),
        source=str(path),
        sm_version=int(gpu["sm_version"]) if gpu.get("sm_version") is not None else None,
    )


def known_systems(dirs: tuple[Path, ...]) -> list[str]:
    """System names the spec folders hold: YAMLs with a `data_dir:` line (the folders also keep manifests)."""
    return sorted({p.stem for d in dirs if d.is_dir() for p in d.glob("*.yaml")
                   if any(line.startswith("data_dir:") for line in p.read_text().splitlines())})


@cache
def load_spec(system: str, search: tuple[Path, ...] | None = None) -> SystemSpec:
    """Load `<system>.yaml` from the first directory that has it (default: `settings.system_spec_dirs()`)."""
    dirs = list(search) if search else settings.system_spec_dirs()
    for d in dirs:
        path = d / f"{system}.yaml"
        if path.is_file():
            return parse_spec(path, system)
    known = known_systems(tuple(dirs))
    close = difflib.get_close_matches(system, known, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise UnknownSystemError(f"unknown system {system!r}: {hint}known systems: {', '.join(known) or 'none'} "
                             f"(system specs in {', '.join(map(str, dirs))})")
