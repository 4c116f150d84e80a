"""Bare-metal artifacts: run_<node>.sh per node (Dynamo target) and bench_run.sh (every target)."""

from __future__ import annotations

from perfledger.generator.allowlist import check_flags
from perfledger.generator.backends import Backend, Launch
from perfledger.generator.model import Deployment
from perfledger.generator.multinode import multinode_form
from perfledger.generator.shell import ShellRaw, render_shell
from perfledger.generator.topology import Placement, pack


def frontend_argv(dep: Deployment) -> list[str]:
    argv = ["python3", "-m", "dynamo.frontend", "--http-port", str(dep.section("ServiceConfig")["port"])]
    return argv + (["--router-mode", "kv"] if dep.section("DynConfig")["enable_router"] else [])


_LOCAL = {"0.0.0.0", "127.0.0.1", "localhost", "::", "::1"}  # wildcard / loopback: not a rendezvous address


def node_address(dep: Deployment, node: int) -> str | None:
    """NodeConfig.node_ips[node]; node 0 falls back to ServiceConfig.head_node_ip; else unknown (None)."""
    ips = dep.section("NodeConfig").get("node_ips", [])
    if node < len(ips):
        return ips[node]
    return dep.section("ServiceConfig")["head_node_ip"] if node == 0 else None


def _blocker(dep: Deployment, plan: list[list[Placement]]) -> str | None:
    """Why per-node scripts cannot be written (a spanning worker the backend/version cannot launch per node)."""
    spanning = [p for node in plan for p in node if p.nnodes > 1]
    if not spanning:
        return None
    form = multinode_form(dep.backend)
    params = {w.role: w.params for w in dep.workers}
    for p in spanning:
        reason = form.unavailable(dep.runtime.data_version, params[p.role])
        if reason:
            return f"Workers.{p.role} spans several nodes and {reason}"
    for p in spanning:
        if node_address(dep, p.first_node) is None:
            return (f"Workers.{p.role} replica {p.replica} spans nodes {p.first_node}-{p.first_node + p.nnodes - 1} "
                    f"and its master address NodeConfig.node_ips[{p.first_node}] is not given")
    return None


def _node_flags(dep: Deployment, p: Placement) -> list[str]:
    """Rendezvous flags of one process of a spanning worker, checked against the version's allow-list."""
    if p.nnodes == 1:
        return []
    version, ips = dep.runtime.data_version, dep.section("NodeConfig").get("node_ips", [])
    where = f"NodeConfig.node_ips[{p.first_node}]" if p.first_node < len(ips) else "ServiceConfig.head_node_ip"
    flags = multinode_form(dep.backend).flags_for(version, p.nnodes, p.rank, node_address(dep, p.first_node),
                                                  dep.section("NodeConfig")["master_port"], where)
    check_flags(dep.backend, version, flags, None, f"Workers.{p.role}")
    return flags


def render_run_scripts(dep: Deployment, backend: Backend, launches: dict[str, Launch]) -> tuple[dict[str, str], list[str]]:
    """({'run_0.sh': text, ...}, warnings): replicas packed onto nodes; the engine file sits beside the script.

    A worker spanning nodes gets one process per node with the backend's rendezvous flags; when the
    backend or version has none, or a master address is unknown, no script is written and a warning says why.
    """
    plan = pack([(w.role, w.replicas, w.gpus) for w in dep.workers], dep.section("NodeConfig")["num_gpus_per_node"])
    blocked = _blocker(dep, plan)
    if blocked:
        return {}, [f"WARNING: no run_<node>.sh: {blocked}; use k8s_deploy.yaml (multinode)"]
    envs = sorted(dep.section("K8sConfig")["k8s_envs"].items())
    warnings = sorted({f"WARNING: Workers.{p.role} spans nodes {p.first_node}-{p.first_node + p.nnodes - 1} with master "
                       f"address {node_address(dep, p.first_node)!r}, which other nodes cannot reach; set "
                       f"NodeConfig.node_ips or ServiceConfig.head_node_ip to a routable address"
                       for node in plan for p in node if p.nnodes > 1 and node_address(dep, p.first_node) in _LOCAL})
    scripts = {}
    for node, placements in enumerate(plan):
        rendered = []
        for placement in placements:
            launch = launches[placement.role]
            engine = backend.engine_file_args(ShellRaw(f'"${{SCRIPT_DIR}}/{launch.engine_file[0]}"')) \
                if launch.engine_file else []
            rendered.append({"devices": placement.visible_devices,
                             "argv": [*launch.command, *launch.args, *_node_flags(dep, placement), *engine]})
        scripts[f"run_{node}.sh"] = render_shell(
            "run_node.sh.j2", node=node, node_count=len(plan), head_node_ip=dep.section("ServiceConfig")["head_node_ip"],
            envs=envs, frontend=frontend_argv(dep) if node == 0 else None, launches=rendered)
    return scripts, warnings


def bench_concurrency(dep: Deployment) -> list[int]:
    """The base sweep plus the estimated concurrency and +-5% around it; sorted, duplicate-free."""
    bench = dep.section("BenchConfig")
    levels = set(bench["concurrency"])
    estimate = bench.get("estimated_concurrency")
    if estimate:
        levels |= {estimate, max(1, round(estimate * 0.95)), round(estimate * 1.05)}
    return sorted(levels)


def render_bench_script(dep: Deployment, url: str) -> str:
    sla = dep.section("SlaConfig")
    return render_shell("bench_run.sh.j2", url=url, model=dep.section("ServiceConfig")["served_model_name"],
                        concurrency=bench_concurrency(dep), isl=sla["isl"], osl=sla["osl"])
