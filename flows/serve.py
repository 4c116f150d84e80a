"""`perfledger serve`: the deployments of prefect.yaml (schedules, parameters) served by this process.

prefect.yaml stays Prefect's own format (so `prefect deploy` works with a work pool too); this module
reads its `deployments:` list and serves each against the configured Prefect server, no pool needed.
The file is `--file`, else the working directory's prefect.yaml (a project's own, not one in the install).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from perfledger.safe_io import InputFileError, load_yaml

PREFECT_YAML = "prefect.yaml"
ENTRYPOINT = "flows/deployments.py:scheduled_run"


class DeploymentError(ValueError):
    """prefect.yaml names something unusable; the message names the file and key."""


@dataclass(frozen=True)
class Deployment:
    name: str
    parameters: dict
    schedules: list[dict] = field(default_factory=list)
    description: str = ""

    def describe_schedules(self) -> list[str]:
        return [f"cron {s['cron']} ({s.get('timezone', 'UTC')})" if "cron" in s else f"every {s['interval']} s"
                for s in self.schedules]


def load_deployments(path: Path | None = None) -> list[Deployment]:
    path = Path(path) if path else Path.cwd() / PREFECT_YAML
    if not path.exists():
        raise DeploymentError(f"{path}: no such deployments file (run from a folder with a prefect.yaml, or pass --file)")
    try:
        raw = load_yaml(path, loader_class=yaml.SafeLoader) or {}
    except InputFileError as exc:
        raise DeploymentError(f"{exc.where}: cannot read ({exc.reason})") from None
    entries = (raw.get("deployments") or []) if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise DeploymentError(f"{path}: expected a mapping with a 'deployments' list")
    out = []
    for i, entry in enumerate(entries):
        where = f"{path}: deployments[{i}]"
        if not isinstance(entry, dict) or "name" not in entry:
            raise DeploymentError(f"{where}: needs a 'name'")
        if not isinstance(entry.get("parameters") or {}, dict) or not isinstance(entry.get("schedules") or [], list):
            raise DeploymentError(f"{where}: 'parameters' must be a mapping and 'schedules' a list")
        if entry.get("entrypoint") != ENTRYPOINT:
            raise DeploymentError(f"{where}.entrypoint: expected {ENTRYPOINT!r}")
        for j, sched in enumerate(entry.get("schedules") or []):
            if not isinstance(sched, dict) or not ({"cron", "interval"} & set(sched)):
                raise DeploymentError(f"{where}.schedules[{j}]: needs 'cron' or 'interval'")
            if "cron" in sched:
                from prefect.schedules import Cron

                try:
                    Cron(str(sched["cron"]), timezone=sched.get("timezone", "UTC"))
                except ValueError as exc:
                    raise DeploymentError(f"{where}.schedules[{j}].cron: {exc}") from None
        out.append(Deployment(str(entry["name"]), dict(entry.get("parameters") or {}),
                              list(entry.get("schedules") or []), str(entry.get("description", ""))))
    if not out:
        raise DeploymentError(f"{path}: no deployments")
    return out


def to_runner(deployment: Deployment):
    """A Prefect RunnerDeployment of the scheduled flow with this entry's schedules and parameters."""
    from prefect.schedules import Cron, Interval

    from perfledger.flows.deployments import scheduled_run

    schedules = [Cron(s["cron"], timezone=s.get("timezone", "UTC")) if "cron" in s else Interval(int(s["interval"]))
                 for s in deployment.schedules]
    return scheduled_run.to_deployment(name=deployment.name, schedules=schedules, parameters=deployment.parameters,
                                       description=deployment.description)


def serve_all(deployments: list[Deployment]) -> None:
    """Block serving every deployment (Ctrl-C stops)."""
    from prefect import serve

    serve(*[to_runner(d) for d in deployments])
