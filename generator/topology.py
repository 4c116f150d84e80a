"""Pack worker replicas onto nodes for bare-metal run scripts: contiguous GPU ranges, frontend on node 0."""

from __future__ import annotations

from dataclasses import dataclass

from generator.errors import GeneratorError


@dataclass(frozen=True)
class Placement:
    """One worker replica on one node, with the GPU indices it sees (CUDA_VISIBLE_DEVICES)."""

    role: str
    replica: int
    node: int
    gpus: tuple[int, ...]

    @property
    def visible_devices(self) -> str:
        return ",".join(str(g) for g in self.gpus)


def pack(workers: list[tuple[str, int, int]], gpus_per_node: int) -> list[list[Placement]]:
    """First fit in role order over (role, replicas, gpus_per_worker); returns placements per node."""
    nodes: list[list[Placement]] = [[]]
    used = 0
    for role, replicas, gpus in workers:
        if gpus > gpus_per_node:
            raise GeneratorError(f"Workers.{role}.gpus_per_worker",
                                 f"{gpus} GPUs exceed NodeConfig.num_gpus_per_node={gpus_per_node}; "
                                 "multi-node workers are not supported in run scripts")
        for replica in range(replicas):
            if used + gpus > gpus_per_node:
                nodes.append([])
                used = 0
            nodes[-1].append(Placement(role, replica, len(nodes) - 1, tuple(range(used, used + gpus))))
            used += gpus
    return nodes
