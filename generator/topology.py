"""Pack worker replicas onto nodes for bare-metal run scripts: contiguous GPU ranges, frontend on node 0.

A worker that fits a node is placed first-fit; one that needs more GPUs than a node has takes whole
nodes (a fresh node to start, every GPU of each), one process per node with its rank in the worker.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfledger.generator.errors import GeneratorError


@dataclass(frozen=True)
class Placement:
    """One worker process on one node, with the GPU indices it sees (CUDA_VISIBLE_DEVICES).

    `rank` / `nnodes` / `first_node`: its place in a worker spanning several nodes (0 / 1 / node otherwise).
    """

    role: str
    replica: int
    node: int
    gpus: tuple[int, ...]
    rank: int = 0
    nnodes: int = 1
    first_node: int = 0

    @property
    def visible_devices(self) -> str:
        return ",".join(str(g) for g in self.gpus)


def nodes_per_worker(role: str, gpus: int, gpus_per_node: int) -> int:
    """1 for a worker within a node; whole nodes otherwise (a remainder is an error naming the key)."""
    if gpus <= gpus_per_node:
        return 1
    if gpus % gpus_per_node:
        raise GeneratorError(f"Workers.{role}.gpus_per_worker",
                             f"{gpus} GPUs do not fill whole nodes of NodeConfig.num_gpus_per_node={gpus_per_node}")
    return gpus // gpus_per_node


def pack(workers: list[tuple[str, int, int]], gpus_per_node: int) -> list[list[Placement]]:
    """First fit in role order over (role, replicas, gpus_per_worker); returns placements per node."""
    nodes: list[list[Placement]] = [[]]
    used = 0
    for role, replicas, gpus in workers:
        span = nodes_per_worker(role, gpus, gpus_per_node)
        for replica in range(replicas):
            if span > 1:
                if used:
                    nodes.append([])
                first = len(nodes) - 1
                for rank in range(span):
                    if rank:
                        nodes.append([])
                    nodes[-1].append(Placement(role, replica, first + rank, tuple(range(gpus_per_node)),
                                               rank, span, first))
                used = gpus_per_node
                continue
            if used + gpus > gpus_per_node:
                nodes.append([])
                used = 0
            node = len(nodes) - 1
            nodes[-1].append(Placement(role, replica, node, tuple(range(used, used + gpus)), first_node=node))
            used += gpus
    return nodes
