"""File paths as a team names them: validated and brought to one normalized form."""

from __future__ import annotations

import unicodedata

from services.files.errors import InvalidPath

PATH_MAX_BYTES = 1024  # UTF-8, normalized
SEGMENT_MAX_BYTES = 255
DEPTH_MAX = 16


def _refuse(message: str) -> InvalidPath:
    return InvalidPath(message)


def _check_characters(raw: str) -> None:
    if "\x00" in raw:
        raise _refuse("a path may not contain NUL")
    if "\\" in raw:
        raise _refuse("a path uses '/' as its separator, never a backslash")
    for ch in raw:
        # Control characters and invisible format characters (bidi overrides, zero-width
        # joiners) would let two different names look the same.
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn"):
            raise _refuse(f"a path may not contain the character U+{ord(ch):04X}")


def _segments(raw: str, *, what: str) -> list[str]:
    if raw.startswith("/"):
        raise _refuse(f"{what} is relative to your team's storage: no leading '/'")
    segments = [s for s in unicodedata.normalize("NFC", raw).split("/") if s not in ("", ".")]
    for s in segments:
        if s == "..":
            raise _refuse(f"{what} may not contain a '..' segment")
        if s != s.strip():
            raise _refuse(f"{what} segments may not start or end with whitespace")
        if len(s.encode()) > SEGMENT_MAX_BYTES:
            raise _refuse(f"a segment of {what} is longer than {SEGMENT_MAX_BYTES} bytes")
    if len(segments) > DEPTH_MAX:
        raise _refuse(f"{what} is deeper than {DEPTH_MAX} segments")
    return segments


def normalize(raw: str) -> str:
    """The one form a file's path is stored and compared in: NFC, '/'-separated, no empty or
    '.' segments. Raises InvalidPath for anything that could escape or mislead."""
    _check_characters(raw)
    segments = _segments(raw, what="a path")
    if not segments:
        raise _refuse("a path names a file: it cannot be empty")
    if raw.endswith("/"):
        raise _refuse("a path names a file: it cannot end with '/'")
    path = "/".join(segments)
    if len(path.encode()) > PATH_MAX_BYTES:
        raise _refuse(f"a path is at most {PATH_MAX_BYTES} bytes")
    return path


def normalize_prefix(raw: str) -> str:
    """A listing prefix in the same form; a trailing '/' is kept (it limits to a folder)."""
    _check_characters(raw)
    segments = _segments(raw, what="a prefix")
    prefix = "/".join(segments)
    if segments and raw.endswith("/"):
        prefix += "/"
    if len(prefix.encode()) > PATH_MAX_BYTES:
        raise _refuse(f"a prefix is at most {PATH_MAX_BYTES} bytes")
    return prefix
