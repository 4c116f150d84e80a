"""Per-node launch flags of a worker that spans several nodes, as data (backends.<b>.multinode).

Each backend spells the rendezvous differently (vLLM --nnodes/--node-rank/--master-addr/--master-port with
--headless followers, SGLang --dist-init-addr host:port), and the forms appear at different versions, so the
mapping holds them with since/until like any other flag. A backend or version without a per-node form
says why, and the run scripts are not written (a warning carries the reason).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from perfledger.generator.errors import GeneratorError
from perfledger.generator.expr import Expr, parse_expr
from perfledger.generator.flags import scalar
from perfledger.generator.mapping import MAPPING_FILE, load_mapping
from perfledger.generator.versions import in_span, parse_version

NAMES = frozenset({"nnodes", "node_rank", "master_addr", "master_port", "master_endpoint"})
_FLAG_KEYS = {"flag", "value", "kind", "since", "until"}


@dataclass(frozen=True)
class NodeFlag:
    name: str
    kind: str  # value | switch
    value: Expr
    since: str | None
    until: str | None


@dataclass(frozen=True)
class MultinodeForm:
    """A backend's per-node launch: its flags and version span, or why it has none."""

    backend: str
    flags: tuple[NodeFlag, ...]
    since: str | None
    until: str | None
    unsupported: str | None
    requires: Expr | None = None  # over the worker's parameters, e.g. no data parallelism
    requires_reason: str = ""

    def unavailable(self, version: str, params: dict | None = None) -> str | None:
        """None when `version` (and the worker's `params`) have a per-node launch, else the reason."""
        if self.unsupported:
            return self.unsupported
        if self.requires is not None and not self.requires.evaluate(lambda n: (params or {}).get(n)):
            return f"{self.backend}: {self.requires_reason}"
        if not in_span(parse_version(version, "version"), self.since, self.until):
            span = " and ".join(p for p in (self.since and f">= {self.since}", self.until and f"< {self.until}") if p)
            return f"{self.backend} {version} has no per-node multi-node launch flags (needs {span})"
        return None

    def flags_for(self, version: str, nnodes: int, node_rank: int, master_addr: str, master_port: int,
                  where: str) -> list[str]:
        """The argv tokens one node's process adds; the address must not read as a flag."""
        env = {"nnodes": nnodes, "node_rank": node_rank, "master_addr": master_addr, "master_port": master_port,
               "master_endpoint": f"{master_addr}:{master_port}"}
        v = parse_version(version, "version")
        out: list[str] = []
        for flag in self.flags:
            if not in_span(v, flag.since, flag.until):
                continue
            value = flag.value.evaluate(env.__getitem__)
            if flag.kind == "switch":
                out.extend([flag.name] if value else [])
            else:
                out.extend([flag.name, scalar(value, where)])
        return out


def parse_form(backend: str, raw: object) -> MultinodeForm:
    """Validate backends.<backend>.multinode; every problem names the mapping file and the entry."""
    where = f"{MAPPING_FILE}: backends.{backend}.multinode"
    if not isinstance(raw, dict) or not raw.keys() <= {"flags", "since", "until", "unsupported", "requires"} \
            or ("flags" in raw) == ("unsupported" in raw):
        raise GeneratorError(where, "expected `flags: [...]` (optional since/until/requires) or `unsupported: reason`")
    requires, reason = None, ""
    if "requires" in raw:
        if not isinstance(raw["requires"], dict) or set(raw["requires"]) != {"expr", "reason"}:
            raise GeneratorError(f"{where}.requires", "expected {expr: <expression over worker keys>, reason: text}")
        requires, reason = parse_expr(str(raw["requires"]["expr"]), f"{where}.requires.expr"), raw["requires"]["reason"]
        unknown = requires.names - set(load_mapping().params)
        if unknown:
            raise GeneratorError(f"{where}.requires.expr", f"unknown worker keys {sorted(unknown)}")
    for bound in ("since", "until"):
        if bound in raw:
            parse_version(raw[bound], f"{where}.{bound}")
    flags = []
    for i, entry in enumerate(raw.get("flags") or []):
        here = f"{where}.flags[{i}]"
        if not isinstance(entry, dict) or not entry.keys() <= _FLAG_KEYS or not {"flag", "value"} <= entry.keys() \
                or entry.get("kind", "value") not in ("value", "switch"):
            raise GeneratorError(here, "expected flag and value, optional kind (value|switch), since, until")
        value = parse_expr(str(entry["value"]), f"{here}.value")
        unknown = value.names - NAMES
        if unknown:
            raise GeneratorError(f"{here}.value", f"unknown names {sorted(unknown)}; known: {sorted(NAMES)}")
        flags.append(NodeFlag(entry["flag"], entry.get("kind", "value"), value, entry.get("since"), entry.get("until")))
    return MultinodeForm(backend, tuple(flags), raw.get("since"), raw.get("until"), raw.get("unsupported"),
                         requires, reason)


@cache
def multinode_form(backend: str) -> MultinodeForm:
    return parse_form(backend, load_mapping().backends[backend].get("multinode"))
