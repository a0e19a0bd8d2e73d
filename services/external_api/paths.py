"""Path patterns of a registered API, and the strict check of the path an agent asks for.

A pattern is `/segment/...`: a literal segment, `*` or `{name}` (exactly one segment), or a
final `**` (any number of segments). The agent's path is refused outright (never normalized)
when it could mean something else to the upstream: `.` or `..` segments, empty segments,
percent-encoding of any kind (`%2e%2e`, `%2f`, `%5c`, `%00`), backslashes, or anything that is
not a plain path character.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from services.external_api.errors import PathNotAllowed

MAX_PATH_LENGTH = 1024
MAX_QUERY_LENGTH = 1024
MAX_PATTERN_LENGTH = 200
MAX_PATTERNS = 32

_SEGMENT = re.compile(r"[A-Za-z0-9._~!$&'()+,;=:@-]+", re.ASCII)
_PLACEHOLDER = re.compile(r"\{[a-z][a-z0-9_]{0,31}\}", re.ASCII)
_QUERY = re.compile(r"([A-Za-z0-9._~!$'()*+,;=:@/?&-]|%[0-9A-Fa-f]{2})*", re.ASCII)


class PathPatternError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class PathPattern:
    text: str
    segments: tuple[str, ...]  # literal, "*" (one segment) or "**" (last: the rest)

    @classmethod
    def parse(cls, text: str) -> PathPattern:
        if not isinstance(text, str) or not text.startswith("/") or len(text) > MAX_PATTERN_LENGTH:
            raise PathPatternError(f"a path pattern starts with / and has at most {MAX_PATTERN_LENGTH} characters")
        parts = text[1:].split("/") if text != "/" else [""]
        segments: list[str] = []
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if part == "**":
                if not last:
                    raise PathPatternError(f"{text!r}: ** only as the last segment")
                segments.append("**")
            elif part == "*" or _PLACEHOLDER.fullmatch(part):
                segments.append("*")
            elif part == "" and last:
                segments.append("")  # a trailing slash, matched exactly
            elif _SEGMENT.fullmatch(part) and part not in (".", ".."):
                segments.append(part)
            else:
                raise PathPatternError(f"{text!r}: bad segment {part!r}")
        return cls(text=text, segments=tuple(segments))

    def matches(self, segments: Sequence[str]) -> bool:
        mine = self.segments
        if mine and mine[-1] == "**":
            head = mine[:-1]
            return len(segments) >= len(head) and all(
                p == "*" or p == s for p, s in zip(head, segments, strict=False)
            )
        return len(mine) == len(segments) and all(p == "*" or p == s for p, s in zip(mine, segments, strict=True))


def parse_patterns(items: Sequence[str]) -> list[PathPattern]:
    if not 0 < len(items) <= MAX_PATTERNS:
        raise PathPatternError(f"1 to {MAX_PATTERNS} path patterns")
    return [PathPattern.parse(p) for p in items]


def split_request_path(raw: str) -> tuple[str, list[str], str]:
    """(path, its segments, query) of the agent's `path`, or PathNotAllowed."""
    path, _, query = raw.partition("?")
    if not path.startswith("/") or path.startswith("//") or len(path) > MAX_PATH_LENGTH:
        raise _refused("the path starts with a single / and has at most 1024 characters")
    if "%" in path:
        raise _refused("percent-encoding is not accepted in the path")
    parts = path[1:].split("/")
    for i, part in enumerate(parts):
        if part == "" and i == len(parts) - 1:
            continue  # a trailing slash
        if part in (".", "..") or not _SEGMENT.fullmatch(part):
            raise _refused(f"path segment {part[:40]!r} is not accepted")
    if len(query) > MAX_QUERY_LENGTH or not _QUERY.fullmatch(query):
        raise _refused("the query string has characters that are not accepted")
    return path, parts, query


def _refused(message: str) -> PathNotAllowed:
    return PathNotAllowed(message)
