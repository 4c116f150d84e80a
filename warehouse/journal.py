"""The commit journal: every write of one unit (an ingest run) becomes visible together, or not at all.

Before the unit's first write to a Delta table, the table's current version (or its absence) goes into
`<root>/.perfledger.journal.json`, replaced atomically; so do the folders the unit creates. While the
journal exists, readers (warehouse.store) read every table it names at the recorded version: they see
the warehouse as it was before the unit. Deleting the journal is the unit's commit, one step. On a
failure the unit is rolled back: each table's log is cut back to its recorded version and the data
files the unit wrote are removed, then the journal goes. A crash leaves the journal behind; the next
writer to take the run lock rolls back first, so the warehouse returns exactly to its last commit.

On object storage (an ObjectLocation root) the journal is one object, replaced in one request; its
deletion is the commit. Object times have one-second resolution there, so a rollback does not tell
the unit's files by time: the log entries after the recorded version name the data files they added,
and those go with them (a data file written by a writer killed before its log entry is unreferenced,
invisible to every reader, and left for `vacuum`).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from perfledger.settings import Location, ObjectLocation
from perfledger.warehouse import objects

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


def _numbered(name: str) -> int | None:
    return int(name[:20]) if name[:20].isdigit() else None


def log_version(table: Location) -> int | None:
    """A Delta table's newest version from its log's file names (None: no table there)."""
    if isinstance(table, ObjectLocation):
        versions = [_numbered(key) for key, _ in objects.listing(table / LOG) if key.endswith(".json")]
        return max((v for v in versions if v is not None), default=None)
    log = table / LOG
    if not log.is_dir():
        return None
    return max((int(p.name[:20]) for p in log.iterdir() if p.name.endswith(".json") and p.name[:20].isdigit()),
               default=None)


@dataclass
class Journal:
    """The open unit: tables (path relative to the root → version before the unit) and created folders."""

    root: Location
    tables: dict[str, int | None] = field(default_factory=dict)
    folders: list[str] = field(default_factory=list)
    created_after_ns: int = 0

    @classmethod
    def begin(cls, root: Path) -> Journal:
        """Open a unit (the caller holds the run lock); a journal left by a crash is rolled back first."""
        recover(root)
        if isinstance(root, ObjectLocation):
            journal = cls(root)
            journal._save()
            return journal
        journal = cls(Path(root))
        journal._save()
        journal.created_after_ns = journal_path(root).stat().st_mtime_ns
        journal._save()
        _fsync_folder(journal.root)
        return journal

    def _save(self) -> None:
        state = {k: v for k, v in asdict(self).items() if k != "root"}
        if isinstance(self.root, ObjectLocation):
            objects.write(self.root / JOURNAL_NAME, json.dumps(state).encode())
            return
        path = journal_path(self.root)
        partial = path.with_name(path.name + ".partial")
        with open(partial, "w", encoding="utf-8") as handle:
            json.dump(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)

    def record_table(self, table: Location) -> None:
        """Remember `table`'s version before the unit's first write to it."""
        key = str(table.relative_to(self.root))
        if key not in self.tables:
            self.tables[key] = log_version(table)
            self._save()

    def record_folders(self, folders: list[Location]) -> None:
        """Remember folders the unit is about to create (removed again on rollback)."""
        new = [key for key in dict.fromkeys(str(f.relative_to(self.root)) for f in folders)
               if key not in self.folders]
        if new:
            self.folders.extend(new)
            self._save()

    def commit(self) -> None:
        """The visible switch: from now on readers see every write of the unit."""
        if isinstance(self.root, ObjectLocation):
            objects.delete([self.root / JOURNAL_NAME])
            return
        journal_path(self.root).unlink()
        _fsync_folder(self.root)

    def roll_back(self) -> None:
        """Return every recorded table and folder to its state before the unit, then close the unit."""
        if isinstance(self.root, ObjectLocation):
            for key, version in self.tables.items():
                _cut_back_objects(self.root / key, version)
            for key in self.folders:
                objects.delete_tree(self.root / key)
            objects.delete([self.root / JOURNAL_NAME])
            return
        for key, version in self.tables.items():
            _cut_back(self.root / key, version, self.created_after_ns)
        for key in self.folders:
            shutil.rmtree(self.root / key, ignore_errors=True)
        journal_path(self.root).unlink(missing_ok=True)
        _fsync_folder(self.root)


def _open_state(root: Location) -> dict | None:
    """The open unit's journal (None: no unit is open)."""
    if isinstance(root, ObjectLocation):
        found = objects.read(root / JOURNAL_NAME)
        return None if found is None else json.loads(found[0])
    try:
        return json.loads(journal_path(root).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def pinned_versions(root: Location) -> dict[str, int | None] | None:
    """What readers must read while a unit is open: table path → version (None: absent); None when no unit."""
    state = _open_state(root)
    return None if state is None else state["tables"]


def recover(root: Location) -> bool:
    """Roll back a unit a crashed writer left open (call with the run lock held); True when there was one."""
    state = _open_state(root)
    if state is None:
        return False
    home = root if isinstance(root, ObjectLocation) else Path(root)
    Journal(home, state["tables"], state["folders"], state["created_after_ns"]).roll_back()
    return True


def _cut_back_objects(table: ObjectLocation, version: int | None) -> None:
    """`_cut_back` on object storage: the log entries after `version` go, with the data files they added."""
    if version is None:
        objects.delete_tree(table)
        return
    log = table / LOG
    entries = objects.listing(log)
    later = sorted((key for key, _ in entries if (_numbered(key) or -1) > version or key.startswith("_commit_")),
                   reverse=True)
    added: list[str] = []
    for key in later:
        if key.endswith(".json") and _numbered(key) is not None and (found := objects.read(log / key)) is not None:
            actions = [json.loads(line) for line in found[0].decode().splitlines() if line.strip()]
            added += [action["add"]["path"] for action in actions if "add" in action]
    last = objects.read(log / LAST_CHECKPOINT)
    if last is not None and json.loads(last[0] or b"{}").get("version", 0) > version:
        objects.delete([log / LAST_CHECKPOINT])
    objects.delete([log / key for key in later])
    objects.delete([table / _unquoted(path) for path in added])


def _unquoted(path: str) -> str:
    """A log entry's data-file path as an object key (Delta URL-encodes partition values in paths)."""
    from urllib.parse import unquote

    return unquote(path)


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
