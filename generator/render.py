"""Every artifact of one deployment as {relative file name: text}; pure (no file IO)."""

from __future__ import annotations

from perfledger.generator.backends import get_backend
from perfledger.generator.k8s_common import bench_manifests
from perfledger.generator.k8s_dynamo import build_dynamo
from perfledger.generator.k8s_llmd import build_helm_values, build_kustomize
from perfledger.generator.model import Deployment
from perfledger.generator.scripts import render_bench_script, render_run_scripts
from perfledger.generator.yamlio import dump_yaml, dump_yaml_all


def render_artifacts(dep: Deployment) -> tuple[dict[str, str], list[str]]:
    """(files, warnings). Dynamo: DGD + run scripts + engine files; llm-d: Helm values or kustomize."""
    backend = get_backend(dep.backend)
    build = backend.launch if dep.target == "dynamo" else backend.standalone_launch
    launches = {w.role: build(dep, w) for w in dep.workers}
    warnings = [w for launch in launches.values() for w in launch.warnings]
    files: dict[str, str] = {}
    for role, launch in launches.items():
        files[f"cli_args_{role}.yaml"] = dump_yaml({"command": list(launch.command), "args": list(launch.args)})
        if launch.engine_file:
            files[launch.engine_file[0]] = dump_yaml(launch.engine_file[1])
    service = dep.section("ServiceConfig")
    if dep.target == "dynamo":
        files["k8s_deploy.yaml"] = dump_yaml_all(build_dynamo(dep, backend, launches))
        scripts, script_warnings = render_run_scripts(dep, backend, launches)
        files.update(scripts)
        warnings += script_warnings
        local_url = f"http://{service['head_node_ip']}:{service['port']}"
    elif dep.target == "llm-d-helm":
        files["llm-d-values.yaml"] = dump_yaml(build_helm_values(dep, backend, launches))
        local_url = dep.names.frontend_url
    else:
        files.update({name: dump_yaml(doc) for name, doc in build_kustomize(dep, backend, launches).items()})
        local_url = dep.names.frontend_url
    files["bench_run.sh"] = render_bench_script(dep, local_url)
    files["k8s_bench.yaml"] = dump_yaml_all(bench_manifests(dep, files["bench_run.sh"]))
    return dict(sorted(files.items())), warnings
