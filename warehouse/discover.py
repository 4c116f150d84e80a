"""Find batches in what the user names: a published tree, the aic wheel, or collector output folders.

A batch is one unit of collected content: a version folder
`<system>/<family>/<backend>/<version>/` of a published tree, or one collector output folder.
Its system/backend/version come from the layout, from flags, from `batch.yaml`, or from the folder
name; never from row labels. Every file of a batch must be a regular file (a symlink may point only
inside the source), so nothing that could block or never end is opened under the warehouse lock.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from perfledger import settings
from perfledger.safe_io import InputFileError, check_regular_file, load_yaml, open_regular, quoted
from perfledger.schemas.catalog import Catalog, CatalogError, check_safe_name

AIC_PACKAGE = "aic-package"
STAGING_SUFFIX = "_perf.txt"
TREE_SIDECARS = ("collection_meta.yaml", "reuse.yaml")
_CAMPAIGN = re.compile(r"(?P<backend>[a-z]+)-(?P<version>\d[\w.+]*?)(?:-[a-z][\w-]*)?")
IDENTITY = ("system", "backend", "version")
LANDING_DEPTH = 4  # how deep collector output folders may sit below a named folder


class SourceError(ValueError):
    """A named source cannot be used at all (missing path, package not installed): a usage error."""


@dataclass
class BatchSource:
    """One batch to ingest: its identity, its table files and its sidecars."""

    kind: str  # "tree" or "staging"
    source: str
    folder: Path
    system: str
    backend: str
    version: str
    family: str | None
    files: list[Path]
    sidecars: list[Path] = field(default_factory=list)
    _hash: str | None = None

    @property
    def key(self) -> str:
        where = [self.system, self.family] if self.family else [self.system]
        return "/".join([*where, self.backend, self.version])

    def content_hash(self) -> str:
        """sha256 over the batch identity and every file's name and bytes (sorted)."""
        if self._hash is None:
            digest = hashlib.sha256(f"{self.kind}|{self.key}".encode())
            for path in sorted([*self.files, *self.sidecars]):
                digest.update(path.name.encode() + b"\0")
                with open_regular(path) as handle:
                    while chunk := handle.read(1 << 20):
                        digest.update(chunk)
            self._hash = digest.hexdigest()
        return self._hash

    @property
    def batch_id(self) -> str:
        return self.content_hash()[:20]


@dataclass
class DiscoveryFailure:
    source: str
    error: str


def aic_package_root() -> Path:
    """The perf tree inside the installed aiconfigurator-core wheel (the `aic-package` source)."""
    package = settings.aic_package_dir()
    if package is None:
        raise SourceError("aic-package: aiconfigurator-core is not installed (pip install 'perfledger[aic]')")
    return package / "systems" / "data"


def _tree_depth(path: Path) -> int | None:
    """How many folder levels below `path` the version folders sit (0: `path` is one; 4: a data root)."""
    for depth in range(5):
        pattern = "*/" * depth
        if any(path.glob(pattern + "*.parquet")) or any(path.glob(pattern + "reuse.yaml")):
            return depth
    return None


def discover(source: str, catalog: Catalog, *, system: str | None = None, backend: str | None = None,
             version: str | None = None) -> list[BatchSource | DiscoveryFailure]:
    """All batches under one source argument, in a stable order."""
    if source == AIC_PACKAGE:
        return _tree_batches(aic_package_root(), source, catalog)
    path = Path(source)
    if not path.exists():
        raise SourceError(f"{source}: no such file or directory")
    if not path.is_dir():
        raise SourceError(f"{source}: expected a folder (collector output, published tree or version folder)")
    if any(path.glob(f"*{STAGING_SUFFIX}")) or _present(path / "batch.yaml"):
        return [_staging_batch(path, source, catalog, system, backend, version, inside=path)]
    for candidate in (path / "systems" / "data", path / "data"):
        if candidate.is_dir() and _tree_depth(candidate) == 4:
            return _tree_batches(candidate, source, catalog)
    depth = _tree_depth(path)
    if depth is None:
        staging = _staging_folders(path)
        if staging:
            return [_staging_batch(folder, str(folder), catalog, system, backend, version, inside=path)
                    for folder in dict.fromkeys(staging)]
        raise SourceError(f"{source}: no perf data found (no <table>_perf.txt, no <system>/<family>/<backend>/<version>/ tree)")
    root = path if depth == 4 else path.resolve().parents[3 - depth]
    return _tree_batches(root, source, catalog, under=path.resolve())


def _staging_folders(path: Path) -> list[Path]:
    """Collector output folders below `path`, nested up to LANDING_DEPTH levels (`landing/<campaign>/<system>/`)."""
    found = {p.parent for depth in range(1, LANDING_DEPTH + 1) for p in path.glob("*/" * depth + f"*{STAGING_SUFFIX}")}
    return sorted(found)


def holds_perf_data(path: Path) -> bool:
    """Whether a folder holds anything `discover` would ingest (a landing folder may still be empty)."""
    return (any(path.glob(f"*{STAGING_SUFFIX}")) or bool(_staging_folders(path)) or _tree_depth(path) is not None
            or any((path / sub).is_dir() and _tree_depth(path / sub) == 4 for sub in ("systems/data", "data")))


def _tree_batches(root: Path, source: str, catalog: Catalog, under: Path | None = None) -> list[BatchSource | DiscoveryFailure]:
    """One batch per version folder of the tree at `root` (only those inside `under` when given)."""
    base = under or root
    depth = len(base.relative_to(root.resolve()).parts) if under else 0
    pattern = "*/" * (4 - depth)
    folders = sorted({p.parent for p in [*base.glob(pattern + "*.parquet"), *base.glob(pattern + "reuse.yaml"),
                                         *base.glob(pattern + f"*{STAGING_SUFFIX}")]})
    root = root.resolve() if under else root
    batches: list[BatchSource | DiscoveryFailure] = []
    for folder in folders:
        system, family, backend, version = folder.relative_to(root).parts
        label = f"{source}:{system}/{family}/{backend}/{version}"
        try:
            catalog.check_system(system)
            catalog.check_backend(backend)
            check_safe_name(version, "version")
            files = _regular(sorted([*folder.glob("*.parquet"), *folder.glob(f"*{STAGING_SUFFIX}")]), root)
            for file in files:
                spec = catalog.table(table_of(file))
                if spec.family != family:
                    raise CatalogError(f"{file}: table {spec.name} belongs to family {spec.family!r}, not {family!r}")
            sidecars = _regular([*(folder / name for name in TREE_SIDECARS if _present(folder / name)),
                                 *sorted(folder.glob("errors_*.json"))], root)
        except (CatalogError, InputFileError) as exc:
            batches.append(DiscoveryFailure(label, str(exc)))
            continue
        batches.append(BatchSource("tree", label, folder, system, backend, version, family, files, sidecars))
    return batches


def _present(path: Path) -> bool:
    """Something is at `path` (a dangling symlink counts: it is reported, not skipped)."""
    return path.exists() or path.is_symlink()


def _regular(paths: list[Path], inside: Path) -> list[Path]:
    """`paths` when every one is a regular file inside the source; raises InputFileError otherwise."""
    return [check_regular_file(path, inside=inside) for path in paths]


def _declared_identity(batch_yaml: Path) -> dict[str, str]:
    """system/backend/version from batch.yaml, as written (`version: 0.20` is "0.20")."""
    declared = load_yaml(batch_yaml) if _present(batch_yaml) else {}
    if declared is not None and not isinstance(declared, dict):
        raise CatalogError(f"{batch_yaml}: expected a mapping with system, backend, version")
    identity = {k: v for k, v in (declared or {}).items() if k in IDENTITY}
    wrong = {k: v for k, v in identity.items() if not isinstance(v, str)}
    if wrong:
        raise CatalogError(f"{batch_yaml}: {', '.join(wrong)} must be a single name, found {quoted(wrong)}")
    return identity


def table_of(file: Path) -> str:
    """The perf table a file holds (its stem)."""
    return file.name.removesuffix(".parquet").removesuffix(".txt")


def _identity_from_folder(folder: Path, catalog: Catalog) -> dict[str, str]:
    found: dict[str, str] = {}
    if folder.name in catalog.systems:
        found["system"] = folder.name
    for name in (folder.name, folder.parent.name):
        match = _CAMPAIGN.fullmatch(name)
        if match and match["backend"] in catalog.backends:
            found.setdefault("backend", match["backend"])
            found.setdefault("version", match["version"])
    return found


def _staging_batch(folder: Path, source: str, catalog: Catalog, system: str | None, backend: str | None,
                   version: str | None, *, inside: Path) -> BatchSource | DiscoveryFailure:
    batch_yaml = folder / "batch.yaml"
    try:
        declared = _declared_identity(batch_yaml)
        inferred = _identity_from_folder(folder, catalog)
        flags = {k: v for k, v in {"system": system, "backend": backend, "version": version}.items() if v}
        identity = {**inferred, **declared, **flags}
        missing = [k for k in IDENTITY if k not in identity]
        if missing:
            raise CatalogError(
                f"{folder}: cannot determine {', '.join(missing)} of this collector output; pass "
                f"--{' --'.join(missing)} or write batch.yaml beside the files (never guessed from row labels)")
        catalog.check_system(identity["system"])
        catalog.check_backend(identity["backend"])
        check_safe_name(identity["version"], "version")
        files = _regular(sorted(folder.glob(f"*{STAGING_SUFFIX}")), inside)
        for file in files:
            catalog.table(table_of(file))
        sidecars = _regular(sorted(p for p in [batch_yaml, folder / "collection_meta.yaml", *folder.glob("errors_*.json"),
                                               *folder.glob("collector_checkpoint/*/*.json")] if _present(p)), inside)
    except (CatalogError, InputFileError) as exc:
        return DiscoveryFailure(source, str(exc))
    return BatchSource("staging", source, folder, identity["system"], identity["backend"], identity["version"],
                       None, files, sidecars)
