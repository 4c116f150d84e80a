"""The warehouse's objects beside its Delta tables on object storage, through obstore.

Delta tables go through deltalake's own storage layer (warehouse.store); everything else a warehouse
keeps on object storage goes through here: the commit journal, the raw input copies, the run-lock
lease, and the listings that find tables and log versions. Every function takes ObjectLocations
(URI + options); listings answer keys relative to the location asked. Every failure of the store
(no bucket, no credentials, a refused request) is an ObjectStoreError, an OSError, so callers treat
it like a failing disk.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from pathlib import Path

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, NotFoundError, PreconditionError
from obstore.store import from_url

from perfledger.settings import ObjectLocation
from perfledger.warehouse.errors import ObjectStoreError

DELTA_ONLY_OPTIONS = {"aws_s3_allow_unsafe_rename", "aws_s3_locking_provider", "delta_dynamo_table_name"}
CLIENT_OPTIONS = {"allow_http", "allow_invalid_certificates", "connect_timeout", "timeout", "proxy_url", "user_agent",
                  "pool_idle_timeout", "pool_max_idle_per_host", "http1_only", "http2_only"}
SCHEME_PREFIXES = ("aws_", "google_", "azure_")
RENAMED = {"endpoint_url": "endpoint"}


def _reason(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def obstore_options(options: dict[str, str]) -> tuple[dict[str, str], dict[str, object]]:
    """deltalake's storage-option keys (`aws_endpoint_url`, `aws_allow_http`, ...) as obstore's store config
    and HTTP client options; options only deltalake's commit layer reads are left out."""
    config: dict[str, str] = {}
    client: dict[str, object] = {}
    for key, value in options.items():
        key = key.lower()
        if key in DELTA_ONLY_OPTIONS:
            continue
        bare = next((key.removeprefix(p) for p in SCHEME_PREFIXES if key.startswith(p)), key)
        if bare in CLIENT_OPTIONS:
            client[bare] = value.lower() == "true" if value.lower() in ("true", "false") else value
        else:
            config[RENAMED.get(bare, bare)] = value
    return config, client


@lru_cache(maxsize=16)
def _bucket(scheme: str, bucket: str, options: tuple[tuple[str, str], ...]):
    """One client per bucket and options (connection pools are reused across calls)."""
    config, client = obstore_options(dict(options))
    try:
        return from_url(f"{scheme}://{bucket}", config=config, client_options=client)
    except BaseError as exc:
        raise ObjectStoreError(f"{scheme}://{bucket}: cannot open the object store ({_reason(exc)})") from None


def _store(location: ObjectLocation):
    return _bucket(location.scheme, location.bucket, location.options)


def _fail(location: ObjectLocation, exc: Exception) -> ObjectStoreError:
    return ObjectStoreError(f"{location}: {_reason(exc)}")


def read(location: ObjectLocation) -> tuple[bytes, str | None] | None:
    """The object's bytes and ETag; None when there is no such object."""
    try:
        result = obstore.get(_store(location), location.key)
        return bytes(result.bytes()), result.meta.get("e_tag")
    except (NotFoundError, FileNotFoundError):
        return None
    except BaseError as exc:
        raise _fail(location, exc) from None


def write(location: ObjectLocation, data: bytes) -> None:
    """Replace (or create) the object in one request: readers see the old or the new bytes, never part."""
    try:
        obstore.put(_store(location), location.key, data)
    except BaseError as exc:
        raise _fail(location, exc) from None


def create(location: ObjectLocation, data: bytes) -> bool:
    """Create the object only if it does not exist (a conditional put); False when it already does."""
    return _put_if(location, data, "create", (AlreadyExistsError, PreconditionError, FileExistsError))


def replace(location: ObjectLocation, data: bytes, e_tag: str) -> bool:
    """Overwrite the object only while it still has `e_tag` (compare-and-swap); False when it changed."""
    return _put_if(location, data, {"e_tag": e_tag},
                   (PreconditionError, NotFoundError, AlreadyExistsError, FileNotFoundError, FileExistsError))


def _put_if(location: ObjectLocation, data: bytes, mode, refused: tuple[type[Exception], ...]) -> bool:
    """A conditional put: True when it was made, False when the store refused the condition (`refused`)."""
    try:
        obstore.put(_store(location), location.key, data, mode=mode)
        return True
    except refused:
        return False
    except BaseError as exc:
        raise _fail(location, exc) from None


def upload(location: ObjectLocation, path: Path) -> None:
    try:
        obstore.put(_store(location), location.key, path)
    except BaseError as exc:
        raise _fail(location, exc) from None


def delete(locations: list[ObjectLocation]) -> None:
    """Delete objects of one bucket (absent ones are no error), up to 1,000 per request."""
    for start in range(0, len(locations), 1000):
        chunk = locations[start:start + 1000]
        try:
            obstore.delete(_store(chunk[0]), [location.key for location in chunk])
        except (NotFoundError, FileNotFoundError):
            pass
        except BaseError as exc:
            raise _fail(chunk[0], exc) from None


def listing(folder: ObjectLocation) -> list[tuple[str, datetime]]:
    """Every object under the folder-like location: (key relative to it, modification time)."""
    prefix = folder.key.strip("/") + "/" if folder.key.strip("/") else None
    try:
        stream = obstore.list(_store(folder), prefix=prefix)
        found = [(meta["path"], meta["last_modified"]) for chunk in stream for meta in chunk]
    except BaseError as exc:
        raise _fail(folder, exc) from None
    return [(key[len(prefix or ""):], modified) for key, modified in found]


def delete_tree(folder: ObjectLocation) -> None:
    """Delete every object under the folder-like location."""
    keys = [folder / key for key, _ in listing(folder)]
    delete(keys)


def _delimited(folder: ObjectLocation) -> dict:
    prefix = folder.key.strip("/") + "/" if folder.key.strip("/") else None
    try:
        return obstore.list_with_delimiter(_store(folder), prefix=prefix)
    except BaseError as exc:
        raise _fail(folder, exc) from None


def exists(folder: ObjectLocation) -> bool:
    """Whether any object lies under the folder-like location."""
    result = _delimited(folder)
    return bool(result["objects"] or result["common_prefixes"])


def children(folder: ObjectLocation) -> list[str]:
    """The names of the folder-like prefixes directly under the location."""
    return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in _delimited(folder)["common_prefixes"])
