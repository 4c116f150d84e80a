"""The warehouse's failures that end a command with one line (perfledger/cli.py catches them): here, apart from
the lock and object-store modules that raise them, so the console script names them without importing filelock
and obstore on every run."""


class WarehouseBusy(RuntimeError):
    """Another process holds the warehouse's run lock."""


class WarehouseUnwritable(PermissionError):
    """The warehouse folder cannot take the run lock (read-only, not a folder): nothing can be written."""


class ObjectStoreError(OSError):
    """A request to the object store failed (its message names the location and the store's reason)."""
