"""Plugin bundles: a directory or a .tar.gz, read into memory with bounded sizes and counts;
never extracted to disk (no absolute paths, no `..`, no links or devices, no duplicates)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.plugins.errors import BundleError, ManifestProblem
from services.plugins.manifest import (
    PLUGIN_FILE,
    TOOL_FILE,
    PluginManifest,
    parse_plugin_json,
    parse_tool_json,
)
from wire.manifest import ToolManifest

MAX_ARCHIVE_BYTES = 512 << 10
MAX_FILES = 64
MAX_FILE_BYTES = 256 << 10
MAX_TOTAL_BYTES = 1 << 20
MAX_JSON_BYTES = 64 << 10
MAX_PATH = 200
_SEGMENT = re.compile(r"[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]{0,99}", re.ASCII)
# Tar headers, padding and end blocks on top of the files' own bytes.
_TAR_OVERHEAD = (MAX_FILES * 3 + 8) * 512 + 20 * 512


@dataclass(frozen=True, slots=True)
class Bundle:
    """A bundle as installed: the archive bytes, their SHA-256, and its files."""

    archive: bytes
    sha256: str
    files: dict[str, bytes]


@dataclass(frozen=True, slots=True)
class Plugin:
    """A checked bundle: its manifest, its catalog entry and its entry's source."""

    bundle: Bundle
    manifest: PluginManifest
    tool: ToolManifest
    source: str


class _Bounded(io.RawIOBase):
    """Reads a decompressing stream, refusing to go past `limit` bytes (gzip bombs)."""

    def __init__(self, inner: io.BufferedIOBase, limit: int) -> None:
        self._inner = inner
        self._left = limit

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self._inner.read(min(len(b), self._left + 1))
        if len(data) > self._left:
            raise BundleError(f"the bundle unpacks to more than {MAX_TOTAL_BYTES} bytes")
        self._left -= len(data)
        b[: len(data)] = data
        return len(data)


def _safe_path(name: str) -> str:
    if "\x00" in name or "\\" in name or name.startswith("/"):
        raise BundleError(f"unsafe path in the bundle: {name[:100]!r}")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or len(name) > MAX_PATH:
        raise BundleError(f"unsafe path in the bundle: {name[:100]!r}")
    for part in parts:
        if part == ".." or _SEGMENT.fullmatch(part) is None:
            raise BundleError(f"unsafe path in the bundle: {name[:100]!r}")
    return "/".join(parts)


def read_archive(archive: bytes) -> Bundle:
    """A .tar.gz's regular files, safely. Raises BundleError."""
    if len(archive) > MAX_ARCHIVE_BYTES:
        raise BundleError(f"the bundle exceeds {MAX_ARCHIVE_BYTES} bytes")
    files: dict[str, bytes] = {}
    total = 0
    try:
        raw = gzip.GzipFile(fileobj=io.BytesIO(archive), mode="rb")
        stream = io.BufferedReader(_Bounded(raw, MAX_TOTAL_BYTES + _TAR_OVERHEAD))
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                path = _safe_path(member.name)
                if member.isdir():
                    continue
                if not member.isreg() or member.issparse():
                    raise BundleError(f"{path}: only regular files and directories (no links, "
                                      "devices or special files)")
                if path in files:
                    raise BundleError(f"{path}: appears twice in the bundle")
                if len(files) >= MAX_FILES:
                    raise BundleError(f"the bundle has more than {MAX_FILES} files")
                if member.size > MAX_FILE_BYTES:
                    raise BundleError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
                total += member.size
                if total > MAX_TOTAL_BYTES:
                    raise BundleError(f"the bundle unpacks to more than {MAX_TOTAL_BYTES} bytes")
                f = tar.extractfile(member)
                assert f is not None
                files[path] = f.read(member.size)
    except BundleError:
        raise
    except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
        raise BundleError(f"not a readable .tar.gz: {exc}") from None
    return Bundle(archive=archive, sha256=hashlib.sha256(archive).hexdigest(),
                  files=_strip_top(files))


def _strip_top(files: dict[str, bytes]) -> dict[str, bytes]:
    """`tar czf b.tgz mydir/` puts everything under mydir/: accept that one level."""
    if PLUGIN_FILE in files or not files:
        return files
    tops = {p.split("/", 1)[0] for p in files}
    if len(tops) == 1 and all("/" in p for p in files):
        top = tops.pop() + "/"
        return {p.removeprefix(top): data for p, data in files.items()}
    return files


def pack_directory(directory: Path) -> bytes:
    """A deterministic .tar.gz of a directory (same files, same bytes, same SHA-256)."""
    if not directory.is_dir():
        raise BundleError(f"{directory} is not a directory")
    entries: list[tuple[str, bytes]] = []
    total = 0
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory).as_posix()
        if path.is_symlink():
            raise BundleError(f"{rel}: links are not allowed in a bundle")
        if path.is_dir():
            continue
        if not path.is_file():
            raise BundleError(f"{rel}: only regular files are allowed in a bundle")
        size = path.stat().st_size
        total += size
        if size > MAX_FILE_BYTES or total > MAX_TOTAL_BYTES or len(entries) >= MAX_FILES:
            raise BundleError(f"the directory is too large for a bundle (at {rel})")
        entries.append((_safe_path(rel), path.read_bytes()))
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel, data in entries:
                info = tarfile.TarInfo(rel)
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def load_bundle(path: Path) -> bytes:
    """The archive bytes of a bundle given as a directory or a .tar.gz file."""
    if path.is_dir():
        return pack_directory(path)
    if not path.is_file():
        raise BundleError(f"{path}: no such directory or file")
    if path.stat().st_size > MAX_ARCHIVE_BYTES:
        raise BundleError(f"{path}: larger than {MAX_ARCHIVE_BYTES} bytes")
    return path.read_bytes()


def _json_file(files: dict[str, bytes], name: str) -> object:
    data = files.get(name)
    if data is None:
        raise ManifestProblem(name, "(file)", "missing from the bundle")
    if len(data) > MAX_JSON_BYTES:
        raise ManifestProblem(name, "(file)", f"larger than {MAX_JSON_BYTES} bytes")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ManifestProblem(name, "(file)", f"not JSON: {str(exc)[:200]}") from None


def check_plugin(bundle: Bundle, *, known_services: frozenset[str] | set[str]) -> Plugin:
    """The bundle's manifest, tool entry and entry source, all validated."""
    manifest = parse_plugin_json(_json_file(bundle.files, PLUGIN_FILE), known_services=known_services)
    tool = parse_tool_json(_json_file(bundle.files, TOOL_FILE), manifest)
    data = bundle.files.get(manifest.entry)
    if data is None:
        raise ManifestProblem(PLUGIN_FILE, "entry", f"{manifest.entry!r} is not in the bundle")
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ManifestProblem(PLUGIN_FILE, "entry", "the entry is not UTF-8 text") from None
    if "\x00" in source:
        raise ManifestProblem(PLUGIN_FILE, "entry", "the entry contains NUL characters")
    return Plugin(bundle=bundle, manifest=manifest, tool=tool, source=source)


def entry_source(bundle: Bundle, entry: str) -> str:
    """The entry of an installed bundle (already checked at install)."""
    return bundle.files[entry].decode("utf-8")
