"""The commit journal: every write of one unit (an ingest run) becomes visible together, or not at all.

Before the unit's first write to a Delta table, the table's current version (or its absence) goes into
`<root>/.perfledger.journal.json`, replaced atomically; so do the folders the unit creates. While the
journal exists, readers (warehouse.store) read every table it names at the recorded version: they see
the warehouse as it was before the unit. Deleting the journal is the unit's commit, one step. On a
failure the unit is rolled back: each table's log is cut back to its recorded version and the data
files the unit wrote are removed, then the journal goes. A crash leaves the journal behind; the next
writer to take the run lock rolls back first, so the warehouse returns exactly to its last commit.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

JOURNAL_NAME = ".perfledger.journal.json"
LOG = "_delta_log"
LAST_CHECKPOINT = "_last_checkpoint"


def journal_path(root: Path) -> Path:
    return Path(root) / JOURNAL_NAME


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def log_version(table: Path) -> int | None:
    """A Delta table's newest version from its log's file names (None: no table there)."""
    log = table / LOG
    if not log.is_dir():
        return None
    return max((int(p.name[:20]) for p in log.iterdir() if p.name.endswith(".json") and p.name[:20].isdigit()),
               default=None)


@dataclass
class Journal:
    """The open unit: tables (path relative to the root → version before the unit) and created folders."""

    root: Path
    tables: dict[str, int | None] = field(default_factory=dict)
    folders: list[str] = field(default_factory=list)
    created_after_ns: int = 0

    @classmethod
    def begin(cls, root: Path) -> Journal:
        """Open a unit (the caller holds the run lock); a journal left by a crash is rolled back first."""
        recover(root)
        journal = cls(Path(root))
        journal._save()
        journal.created_after_ns = journal_path(root).stat().st_mtime_ns
        journal._save()
        _fsync_folder(journal.root)
        return journal

    def _save(self) -> None:
        path = journal_path(self.root)
        partial = path.with_name(path.name + ".partial")
        state = {k: v for k, v in asdict(self).items() if k != "root"}
        with open(partial, "w", encoding="utf-8") as handle:
            json.dump(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)

    def record_table(self, table: Path) -> None:
        """Remember `table`'s version before the unit's first write to it."""
        key = str(Path(table).relative_to(self.root))
        if key not in self.tables:
            self.tables[key] = log_version(Path(table))
            self._save()

    def record_folders(self, folders: list[Path]) -> None:
        """Remember folders the unit is about to create (removed again on rollback)."""
        new = [key for key in dict.fromkeys(str(Path(f).relative_to(self.root)) for f in folders)
               if key not in self.folders]
        if new:
            self.folders.extend(new)
            self._save()

    def commit(self) -> None:
        """The visible switch: from now on readers see every write of the unit."""
        journal_path(self.root).unlink()
        _fsync_folder(self.root)

    def roll_back(self) -> None:
        """Return every recorded table and folder to its state before the unit, then close the unit."""
        for key, version in self.tables.items():
            _cut_back(self.root / key, version, self.created_after_ns)
        for key in self.folders:
            shutil.rmtree(self.root / key, ignore_errors=True)
        journal_path(self.root).unlink(missing_ok=True)
        _fsync_folder(self.root)


def pinned_versions(root: Path) -> dict[str, int | None] | None:
    """What readers must read while a unit is open: table path → version (None: absent); None when no unit."""
    try:
        text = journal_path(root).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return json.loads(text)["tables"]


def recover(root: Path) -> bool:
    """Roll back a unit a crashed writer left open (call with the run lock held); True when there was one."""
    path = journal_path(root)
    if not path.exists():
        return False
    state = json.loads(path.read_text(encoding="utf-8"))
    Journal(Path(root), state["tables"], state["folders"], state["created_after_ns"]).roll_back()
    return True


def _cut_back(table: Path, version: int | None, created_after_ns: int) -> None:
    """Make `table` what it was at `version` (None: absent): newer log entries and checkpoints and the
    files the unit wrote go. Every file version `version` references is older than the unit, and every
    file the unit wrote is newer than the journal, so the file times tell them apart."""
    log = table / LOG
    if log.is_dir():
        last = log / LAST_CHECKPOINT
        if last.exists() and (version is None or json.loads(last.read_text() or "{}").get("version", 0) > version):
            last.unlink()
        for entry in sorted(log.iterdir(), reverse=True):
            numbered = entry.name[:20].isdigit()
            if (numbered and (version is None or int(entry.name[:20]) > version)) or \
                    (not numbered and entry.name != LAST_CHECKPOINT and entry.stat().st_mtime_ns > created_after_ns):
                entry.unlink()
        if version is None:
            log.rmdir()
    if not table.is_dir():
        return
    for path in sorted(table.rglob("*"), reverse=True):
        if path.is_relative_to(log):
            continue
        if path.is_file() and path.stat().st_mtime_ns > created_after_ns:
            path.unlink()
        elif path.is_dir() and path.stat().st_mtime_ns > created_after_ns and not any(path.iterdir()):
            path.rmdir()
    if version is None and not any(table.iterdir()):
        table.rmdir()
