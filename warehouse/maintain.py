"""Table maintenance for every warehouse table: vacuum old files, compact small ones, write checkpoints.

Vacuum deletes data files no version newer than the retention window needs: time travel to a version
older than that window stops working (its log entry stays, its files go). A dry run lists what would
be removed and changes nothing. Everything else runs under the warehouse's run lock, so no ingest's
commit unit is open while files are removed (a unit's rollback needs the files it recorded).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
from deltalake.exceptions import DeltaError

from perfledger.warehouse.lock import run_lock
from perfledger.warehouse.store import Warehouse, WarehouseError


@dataclass(frozen=True)
class Maintenance:
    vacuum: bool = False
    retain_days: float = 7.0
    optimize: bool = False
    checkpoint: bool = False
    dry_run: bool = False

    def __post_init__(self) -> None:
        if self.retain_days < 0:
            raise ValueError(f"--retain-days {self.retain_days}: must be 0 or more")
        if not (self.vacuum or self.optimize or self.checkpoint):
            raise ValueError("nothing to do: name --vacuum, --optimize and/or --checkpoint")


def _small_file_groups(table) -> dict[str, int]:
    """Partitions holding more than one data file (what compaction would merge), with their file counts."""
    actions = pa.table(table.get_add_actions(flatten=True)).to_pydict()
    keys = [k for k in actions if k.startswith("partition.")]
    counts = Counter(tuple(actions[k][i] for k in keys) for i in range(len(actions["path"])))
    return {"/".join(map(str, part)) or "(table)": n for part, n in counts.items() if n > 1}


def _stored(table, relative: str) -> bool:
    """Whether a file the log names is still stored (a local table is checked on disk; other stores are
    taken at the log's word)."""
    uri = table.table_uri
    if uri.startswith("file://"):
        uri = unquote(uri.removeprefix("file://"))
    elif "://" in uri:
        return True
    return (Path(uri) / relative).exists()


def _one(table, name: str, plan: Maintenance) -> dict:
    """Compact first, so a vacuum in the same pass may already remove the files compaction replaced."""
    entry: dict = {"table": name, "version": table.version()}
    if plan.optimize:
        groups = _small_file_groups(table)
        if plan.dry_run or not groups:
            entry["optimize"] = {"partitions": len(groups), "files": sum(groups.values()), "done": False}
        else:
            metrics = table.optimize.compact()
            entry["optimize"] = {"partitions": len(groups), "files": metrics.get("numFilesRemoved"),
                                 "files_added": metrics.get("numFilesAdded"), "done": True}
    if plan.vacuum:
        candidates = table.vacuum(retention_hours=int(plan.retain_days * 24), dry_run=True,
                                  enforce_retention_duration=False)
        doomed = sorted(f for f in candidates if _stored(table, f))  # tombstones outlive the files they name
        if doomed and not plan.dry_run:
            table.vacuum(retention_hours=int(plan.retain_days * 24), dry_run=False, enforce_retention_duration=False)
        entry["vacuum"] = {"files": doomed, "count": len(doomed)}
    if plan.checkpoint:
        if not plan.dry_run:
            table.create_checkpoint()
        entry["checkpoint"] = {"version": table.version(), "done": not plan.dry_run}
    return entry


def maintain(wh: Warehouse, plan: Maintenance) -> list[dict]:
    """Apply `plan` to every curated and auxiliary table; one entry per table (what was or would be done)."""
    names = [(t, True) for t in wh.curated_tables()] + [(t, False) for t in wh.auxiliary_tables()]
    if not names:
        raise WarehouseError(f"warehouse {wh.root} holds no tables")

    def run() -> list[dict]:
        out = []
        for name, curated in names:
            table = wh.open_table(name, curated=curated)
            if table is None:
                continue
            try:
                out.append(_one(table, f"curated/{name}" if curated else name, plan))
            except (OSError, DeltaError) as exc:
                raise WarehouseError(f"cannot maintain table {name} in warehouse {wh.root}: {exc}") from exc
        return out

    if plan.dry_run:
        return run()
    with run_lock(wh.root, purpose="maintain"):
        return run()
