"""Files read and written without surprises.

Reading: only regular files (a FIFO, device or folder named like an input is refused, never opened in a
way that blocks), within a size cap; YAML and JSON are parsed with caps on size, nesting and alias
expansion; YAML scalars stay the text written (`version: 0.20` is "0.20") unless a config asks for typed
values (a SafeLoader). Writing: every artifact is a
new file renamed over its name, so a link planted in an output folder is replaced, never followed.
Every failure is an `InputFileError` whose message starts with `file[:line[:column]]`.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

import yaml
from yaml.nodes import MappingNode, SequenceNode

MAX_SIDECAR_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 1_000_000
QUOTE_CHARS = 120


class InputFileError(ValueError):
    """A file cannot be used; the message names it (and the line and column where one applies)."""

    def __init__(self, path: Path | str, reason: str, line: int | None = None, column: int | None = None):
        where = ":".join(str(p) for p in (path, line, column) if p is not None)
        super().__init__(f"{where}: {reason}")
        self.path, self.reason, self.line, self.column, self.where = str(path), reason, line, column, where


class UnsafeOutputError(OSError):
    """An output location would make a write land outside the folder the user named."""


def quoted(value: object, limit: int = QUOTE_CHARS) -> str:
    """`repr(value)`, cut to `limit` characters with the full length noted (messages never carry megabytes)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} chars)"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular_file(path: Path, *, inside: Path | None = None) -> Path:
    """`path` when it is a regular file (a symlink to one counts, unless it leaves `inside`)."""
    try:
        if path.is_symlink():
            target = path.resolve(strict=True)
            if inside is not None and not target.is_relative_to(inside.resolve()):
                raise InputFileError(path, f"symlink to {target} leaves the source {inside}; copy the file in instead")
        mode = path.stat().st_mode
    except OSError as exc:
        raise InputFileError(path, f"cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        raise InputFileError(path, f"{_kind(mode)}, not a regular file; only regular files are read")
    return path


def open_regular(path: Path) -> BinaryIO:
    """Open a regular file for reading; anything else is refused without blocking (O_NONBLOCK on open)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputFileError(path, f"cannot read ({exc.strerror or exc})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InputFileError(path, f"{_kind(mode)}, not a regular file; only regular files are read")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_bytes(path: Path, limit: int | None = None) -> bytes:
    """The bytes of a regular file, refused when larger than `limit`."""
    with open_regular(path) as handle:
        data = handle.read() if limit is None else handle.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise InputFileError(path, f"larger than {limit:,} bytes; not read")
    return data


def decode_utf8(data: bytes, path: Path) -> str:
    """UTF-8 text without a leading byte-order mark; a bad byte is named by line and column."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputFileError(path, f"not UTF-8 text (byte 0x{data[exc.start]:02x})", line, column) from None
    return text.removeprefix("\ufeff")


def _check_node_budget(root: yaml.Node, path: Path) -> None:
    """Refuse documents nested deeper than MAX_DEPTH or expanding (aliases included) past MAX_NODES."""
    expanded = 0
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        expanded += 1
        if depth > MAX_DEPTH:
            raise InputFileError(path, f"nested deeper than {MAX_DEPTH} levels", node.start_mark.line + 1,
                                 node.start_mark.column + 1)
        if expanded > MAX_NODES:
            raise InputFileError(path, f"expands to more than {MAX_NODES:,} values (YAML aliases?); refused")
        if isinstance(node, SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
        elif isinstance(node, MappingNode):
            stack.extend((part, depth + 1) for pair in node.value for part in pair)


def sidecar_text(path: Path, data: bytes | None = None) -> str:
    """A sidecar's text within the size cap: read from `path`, or from `data` when its bytes were read
    elsewhere already (a batch shipped to a worker); `path` names it in messages either way."""
    if data is None:
        data = read_bytes(path, MAX_SIDECAR_BYTES)
    elif len(data) > MAX_SIDECAR_BYTES:
        raise InputFileError(path, f"larger than {MAX_SIDECAR_BYTES:,} bytes; not read")
    return decode_utf8(data, path)


def load_yaml(path: Path, *, loader_class: type[yaml.BaseLoader] = yaml.BaseLoader, data: bytes | None = None) -> object:
    """A YAML file within the caps (None for an empty document): every scalar as its text, or typed as
    YAML 1.1 reads it with `loader_class=yaml.SafeLoader` (or a subclass) for configs of numbers and flags.
    `data`: the file's bytes when already read (see sidecar_text)."""
    text = sidecar_text(path, data)
    loader = None
    try:
        loader = loader_class(text)
        node = loader.get_single_node()
        if node is None:
            return None
        _check_node_budget(node, path)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        reason = " ".join(f"{exc.context or ''} {exc.problem or ''}".split())
        raise InputFileError(path, f"not valid YAML ({at}{reason})") from None
    except yaml.YAMLError as exc:
        raise InputFileError(path, f"not valid YAML ({quoted(str(exc))})") from None
    except RecursionError:
        raise InputFileError(path, "nested too deeply to parse") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_json(path: Path, data: bytes | None = None) -> object:
    """A JSON file within the size and nesting caps (`data`: its bytes when already read, see sidecar_text)."""
    text = sidecar_text(path, data)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFileError(path, f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise InputFileError(path, "nested too deeply to parse") from None
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputFileError(path, f"nested deeper than {MAX_DEPTH} levels")
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children)
    return data


def check_output_folder(out: Path, *, allow_symlink: bool = False) -> Path:
    """`out` when writing into it stays in its own tree: a symlinked output folder pointing elsewhere
    (outside the folder the link sits in) is refused unless `allow_symlink`."""
    if out.is_symlink() and not allow_symlink:
        target = out.resolve()
        if not target.is_relative_to(out.parent.resolve()):
            raise UnsafeOutputError(f"output folder {out} is a symlink to {target}, outside {out.parent}; "
                                    "name the real folder, or pass --allow-symlinked-out to write there")
    if out.exists() and not out.is_dir():
        raise UnsafeOutputError(f"output folder {out} exists and is not a folder")
    return out


def make_folders(out: Path, relative: Path) -> Path:
    """Create `out/relative` folder by folder; a symlink or file planted on the way is refused."""
    folder = out
    folder.mkdir(parents=True, exist_ok=True)
    for part in relative.parts:
        folder = folder / part
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise UnsafeOutputError(f"{folder} is a symlink or file, not a folder; refusing to write through it")
        folder.mkdir(exist_ok=True)
    return folder


def write_file(out: Path, name: str | Path, data: str | bytes, *, mode: int = 0o644) -> Path:
    """Write `out/name` as a new file (exclusive temp name, then rename over): whatever was at the name
    before, a planted symlink included, is replaced and never written through."""
    relative = Path(name)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        raise UnsafeOutputError(f"file name {str(name)!r} escapes the output folder {out}")
    folder = make_folders(out, relative.parent)
    fd, partial = tempfile.mkstemp(dir=folder, prefix=f".{relative.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            os.fchmod(handle.fileno(), mode)
        os.replace(partial, folder / relative.name)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return folder / relative.name


_DATA_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def data_yaml(path: Path | str) -> object:
    """One of perfledger's own data files (package YAML, system specs, the reference data's manifests), typed as
    yaml.safe_load reads it, parsed by libyaml where PyYAML has it: ~5x less CPU than the pure-Python parser,
    which dominated a cold `perfledger plan`. Same SafeLoader constructors, so the same values; not for
    untrusted input (no caps: see load_yaml)."""
    return yaml.load(Path(path).read_text(), Loader=_DATA_LOADER)  # noqa: S506 - a safe loader
