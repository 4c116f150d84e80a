"""Subprocess side of the reliability tests (run as `python -m tests.flows.reliability_worker MODE ...`).

`ingest WH SRC...`: print READY once imports are done, wait for a line on stdin, then ingest with the ledger hook (the test
kills it at a random moment). `full WH SMALL BIG`: ingest SMALL, then BIG into a warehouse on a tiny
file system, and print the table versions before/after and the CLI's exit code and message as JSON.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def table_versions(root: Path | str) -> dict[str, int | None]:
    """Every Delta table under the root (a folder or an object-store URI) with its version, each fully read
    (a torn commit would raise); a `_delta_log` without a commit (its writer killed before the first) is no table."""
    from deltalake import DeltaTable

    from perfledger.settings import ObjectLocation, location
    from perfledger.warehouse import objects
    from perfledger.warehouse.journal import log_version

    place = location(root)
    if isinstance(place, ObjectLocation):
        names = sorted({key.rsplit("/_delta_log/", 1)[0] for key, _ in objects.listing(place) if "/_delta_log/" in key})
        tables = [(name, DeltaTable(str(place / name), storage_options=place.storage_options)) for name in names]
    else:
        tables = [(str(log.parent.relative_to(place)), DeltaTable(str(log.parent))) for log in sorted(place.rglob("_delta_log"))
                  if log_version(log.parent) is not None]
    out = {}
    for name, table in tables:
        table.to_pyarrow_table()
        out[name] = table.version()
    return out


def main(argv: list[str]) -> None:
    mode, root, *sources = argv
    if mode == "ingest":
        from perfledger.ledger.hooks import on_ingest
        from perfledger.warehouse.ingest import ingest
        from perfledger.warehouse.store import Warehouse

        print("READY", flush=True)
        sys.stdin.readline()  # the test says when to start (it pre-spawns workers while it checks the last one)
        started = time.perf_counter()
        report = ingest(sources, Warehouse(root), on_commit=on_ingest)
        print(json.dumps({"seconds": time.perf_counter() - started, "new_batches": report.new_batches}), flush=True)
        return
    if mode == "full":
        from typer.testing import CliRunner

        from perfledger.cli import app

        small, big = sources
        first = CliRunner().invoke(app, ["ingest", small, "--warehouse", root, "--json"])
        before = table_versions(root)
        second = CliRunner().invoke(app, ["ingest", big, "--warehouse", root, "--json"])
        print(json.dumps({"first": first.exit_code, "code": second.exit_code, "output": second.output,
                          "before": before, "after": table_versions(root)}))
        return
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
