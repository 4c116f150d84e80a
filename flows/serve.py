"""`perfledger serve`: the deployments of prefect.yaml (schedules, parameters) served by this process.

prefect.yaml stays Prefect's own format, so `prefect deploy --all` pushes the same entries to their work
pool; this module reads its `deployments:` list and serves each against the configured Prefect server.
Every key an entry may hold is either honoured here (name, description, version, tags, parameters,
paused, concurrency_limit, enforce_parameter_schema, schedules of every kind with active / parameters /
slug) or named as what it is: `work_pool` and `pull`/`build`/`push` steps belong to workers started by
`prefect deploy` (serving runs flows in this process, so they are reported, not used); keys Prefect
would ignore or that serving cannot do (`triggers`, `sla`, a deployment-level `active`, anything
unknown) are refused with the file and key. The file is `--file`, else the working directory's
prefect.yaml.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import yaml

from perfledger.safe_io import InputFileError, load_yaml

PREFECT_YAML = "prefect.yaml"
ENTRYPOINTS = ("perfledger.flows.deployments:scheduled_run", "flows/deployments.py:scheduled_run")  # module, file
SERVED_KEYS = {"name", "description", "version", "tags", "parameters", "paused", "concurrency_limit",
               "enforce_parameter_schema", "schedules", "schedule", "entrypoint"}
WORKER_KEYS = {"work_pool", "pull", "build", "push"}  # used by `prefect deploy` + a worker, not by serving
REFUSED_KEYS = {
    "triggers": "event triggers are not served by perfledger serve; use prefect deploy --all",
    "sla": "SLAs are not served by perfledger serve; use prefect deploy --all",
    "active": "a deployment has no 'active' key (Prefect ignores it); write 'paused: true', or 'active: false' on a schedule",
}
SCHEDULE_KINDS = ("cron", "interval", "rrule")
SCHEDULE_KEYS = {*SCHEDULE_KINDS, "timezone", "active", "parameters", "slug", "day_or", "anchor_date"}
CONCURRENCY_KEYS = {"limit", "collision_strategy", "grace_period_seconds"}
COLLISION_STRATEGIES = ("ENQUEUE", "CANCEL_NEW")


class DeploymentError(ValueError):
    """prefect.yaml names something unusable; the message names the file and key."""


class ServerMissing(RuntimeError):
    """Serving needs a Prefect server that outlives this process."""


@dataclass(frozen=True)
class Deployment:
    name: str
    parameters: dict
    schedules: list[dict] = field(default_factory=list)
    description: str = ""
    tags: list[str] = field(default_factory=list)
    version: str | None = None
    paused: bool = False
    concurrency_limit: dict | None = None  # {"limit": N, "collision_strategy": ENQUEUE|CANCEL_NEW}
    enforce_parameter_schema: bool = True
    work_pool: dict | None = None           # for `prefect deploy` workers; reported by serve
    worker_steps: list[str] = field(default_factory=list)

    def describe_schedules(self) -> list[str]:
        out = []
        for s in self.schedules:
            kind = next(k for k in SCHEDULE_KINDS if k in s)
            text = f"every {s['interval']} s" if kind == "interval" else f"{kind} {s[kind]} ({s.get('timezone') or 'UTC'})"
            out.append(text + ("" if s.get("active", True) else " [inactive]"))
        return out

    def describe(self) -> dict:
        """What serving this entry means, key by key (the --dry-run payload)."""
        notes = []
        if self.work_pool:
            notes.append(f"work_pool {self.work_pool.get('name')!r} is used by `prefect deploy --all` and its workers; "
                         "perfledger serve runs the flows in this process")
        if self.worker_steps:
            notes.append(f"{'/'.join(self.worker_steps)} steps run on a worker (prefect deploy), not when serving")
        return {"name": self.name, "schedules": self.describe_schedules(), "parameters": self.parameters,
                "tags": self.tags, "version": self.version, "paused": self.paused,
                "concurrency_limit": self.concurrency_limit, "work_pool": (self.work_pool or {}).get("name"),
                "notes": notes}


def _fail(where: str, message: str) -> DeploymentError:
    return DeploymentError(f"{where}: {message}")


def _schedule(sched: object, where: str) -> dict:
    if not isinstance(sched, dict):
        raise _fail(where, "must be a mapping with 'cron', 'interval' or 'rrule'")
    kinds = [k for k in SCHEDULE_KINDS if k in sched]
    if len(kinds) != 1:
        raise _fail(where, "needs exactly one of 'cron', 'interval' or 'rrule'")
    unknown = sorted(set(sched) - SCHEDULE_KEYS)
    if unknown:
        raise _fail(where, f"unknown key(s) {unknown}; known: {sorted(SCHEDULE_KEYS)}")
    if "active" in sched and not isinstance(sched["active"], bool):
        raise _fail(f"{where}.active", "must be true or false")
    if "parameters" in sched and not isinstance(sched["parameters"], dict):
        raise _fail(f"{where}.parameters", "must be a mapping")
    try:
        to_schedule(sched)
    except (ValueError, TypeError) as exc:
        raise _fail(f"{where}.{kinds[0]}", str(exc).splitlines()[0]) from None
    return dict(sched)


def to_schedule(sched: dict):
    """A Prefect schedule object from one prefect.yaml schedule entry (every option carried over)."""
    from prefect.schedules import Cron, Interval, RRule

    common = {"timezone": sched.get("timezone") or "UTC", "active": sched.get("active", True),
              "parameters": sched.get("parameters") or {}, "slug": sched.get("slug")}
    if "cron" in sched:
        return Cron(str(sched["cron"]), day_or=sched.get("day_or", True), **common)
    if "rrule" in sched:
        return RRule(str(sched["rrule"]), **common)
    interval = sched["interval"]
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
        raise ValueError(f"interval must be a positive number of seconds, not {interval!r}")
    anchor = sched.get("anchor_date")
    anchor = datetime.fromisoformat(str(anchor)) if anchor is not None and not isinstance(anchor, datetime) else anchor
    return Interval(timedelta(seconds=interval), anchor_date=anchor, **common)


def _concurrency(value: object, where: str) -> dict | None:
    if value is None:
        return None
    spec = {"limit": value} if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(spec, dict) or set(spec) - CONCURRENCY_KEYS:
        raise _fail(where, f"expected a number or a mapping with {sorted(CONCURRENCY_KEYS)}")
    limit = spec.get("limit")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise _fail(f"{where}.limit", "must be a whole number of at least 1")
    strategy = str(spec.get("collision_strategy") or "ENQUEUE").upper()
    if strategy not in COLLISION_STRATEGIES:
        raise _fail(f"{where}.collision_strategy", f"expected one of {list(COLLISION_STRATEGIES)}")
    if "grace_period_seconds" in spec:
        raise _fail(f"{where}.grace_period_seconds", "not settable when serving; leave it to prefect deploy or remove it")
    return {"limit": limit, "collision_strategy": strategy}


def _entry(entry: object, where: str) -> Deployment:
    if not isinstance(entry, dict) or "name" not in entry:
        raise _fail(where, "needs a 'name'")
    for key, reason in REFUSED_KEYS.items():
        if key in entry:
            raise _fail(f"{where}.{key}", reason)
    unknown = sorted(set(entry) - SERVED_KEYS - WORKER_KEYS)
    if unknown:
        raise _fail(where, f"unknown key(s) {unknown}; served: {sorted(SERVED_KEYS)}, for workers: {sorted(WORKER_KEYS)}")
    if entry.get("entrypoint") not in ENTRYPOINTS:
        raise _fail(f"{where}.entrypoint", f"expected {ENTRYPOINTS[0]!r} (or the checkout's {ENTRYPOINTS[1]!r})")
    if not isinstance(entry.get("parameters") or {}, dict):
        raise _fail(f"{where}.parameters", "must be a mapping")
    schedules = entry.get("schedules") or []
    if entry.get("schedule") is not None:
        schedules = [entry["schedule"], *schedules]
    if not isinstance(schedules, list):
        raise _fail(f"{where}.schedules", "must be a list")
    tags = entry.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise _fail(f"{where}.tags", "must be a list of names")
    for key in ("paused", "enforce_parameter_schema"):
        if key in entry and not isinstance(entry[key], bool):
            raise _fail(f"{where}.{key}", "must be true or false")
    pool = entry.get("work_pool")
    if pool is not None and not (isinstance(pool, dict) and isinstance(pool.get("name"), str)):
        raise _fail(f"{where}.work_pool", "must be a mapping with a 'name'")
    return Deployment(
        name=str(entry["name"]), parameters=dict(entry.get("parameters") or {}),
        schedules=[_schedule(s, f"{where}.schedules[{j}]") for j, s in enumerate(schedules)],
        description=str(entry.get("description") or ""), tags=list(tags),
        version=None if entry.get("version") is None else str(entry["version"]), paused=bool(entry.get("paused", False)),
        concurrency_limit=_concurrency(entry.get("concurrency_limit"), f"{where}.concurrency_limit"),
        enforce_parameter_schema=bool(entry.get("enforce_parameter_schema", True)), work_pool=pool,
        worker_steps=[k for k in ("pull", "build", "push") if entry.get(k)])


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
    out = [_entry(entry, f"{path}: deployments[{i}]") for i, entry in enumerate(entries)]
    if not out:
        raise DeploymentError(f"{path}: no deployments")
    names = [d.name for d in out]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise DeploymentError(f"{path}: deployment name(s) {repeated} repeated")
    return out


def to_runner(deployment: Deployment):
    """A Prefect RunnerDeployment of the scheduled flow carrying every served key of the entry."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy

    from perfledger.flows.deployments import scheduled_run

    limit = deployment.concurrency_limit
    return scheduled_run.to_deployment(
        name=deployment.name, schedules=[to_schedule(s) for s in deployment.schedules], parameters=deployment.parameters,
        description=deployment.description, tags=deployment.tags, version=deployment.version, paused=deployment.paused,
        concurrency_limit=None if limit is None else ConcurrencyLimitConfig(
            limit=limit["limit"], collision_strategy=ConcurrencyLimitStrategy(limit["collision_strategy"])),
        enforce_parameter_schema=deployment.enforce_parameter_schema)


def check_server(ephemeral: bool) -> None:
    """Serving registers schedules with a server; a temporary one would drop them when this process ends."""
    from prefect.settings import PREFECT_API_URL

    if not (PREFECT_API_URL.value() or os.environ.get("PREFECT_API_URL")) and not ephemeral:
        raise ServerMissing("PREFECT_API_URL is not set: perfledger serve would start a temporary Prefect server whose "
                            "schedules and run history vanish when this process ends. Start one (prefect server start) "
                            "and export PREFECT_API_URL=http://127.0.0.1:4200/api, or pass --ephemeral to accept that")


def serve_all(deployments: list[Deployment]) -> None:
    """Block serving every deployment (Ctrl-C stops)."""
    from prefect import serve

    serve(*[to_runner(d) for d in deployments])
