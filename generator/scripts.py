"""Bare-metal artifacts: run_<node>.sh per node (Dynamo target) and bench_run.sh (every target)."""

from __future__ import annotations

from generator.backends import Backend, Launch
from generator.model import Deployment
from generator.shell import ShellRaw, render_shell
from generator.topology import pack


def frontend_argv(dep: Deployment) -> list[str]:
    argv = ["python3", "-m", "dynamo.frontend", "--http-port", str(dep.section("ServiceConfig")["port"])]
    return argv + (["--router-mode", "kv"] if dep.section("DynConfig")["enable_router"] else [])


def spanning_workers(dep: Deployment) -> list[str]:
    """Roles whose single worker needs more GPUs than one node has (no bare-metal launcher for those)."""
    per_node = dep.section("NodeConfig")["num_gpus_per_node"]
    return [w.role for w in dep.workers if w.gpus > per_node]


def render_run_scripts(dep: Deployment, backend: Backend, launches: dict[str, Launch]) -> dict[str, str]:
    """{'run_0.sh': text, ...}: replicas packed onto nodes; the engine file sits beside the script."""
    plan = pack([(w.role, w.replicas, w.gpus) for w in dep.workers], dep.section("NodeConfig")["num_gpus_per_node"])
    envs = sorted(dep.section("K8sConfig")["k8s_envs"].items())
    scripts = {}
    for node, placements in enumerate(plan):
        rendered = []
        for placement in placements:
            launch = launches[placement.role]
            engine = backend.engine_file_args(ShellRaw(f'"${{SCRIPT_DIR}}/{launch.engine_file[0]}"')) \
                if launch.engine_file else []
            rendered.append({"devices": placement.visible_devices,
                             "argv": [*launch.command, *launch.args, *engine]})
        scripts[f"run_{node}.sh"] = render_shell(
            "run_node.sh.j2", node=node, node_count=len(plan), head_node_ip=dep.section("ServiceConfig")["head_node_ip"],
            envs=envs, frontend=frontend_argv(dep) if node == 0 else None, launches=rendered)
    return scripts


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
