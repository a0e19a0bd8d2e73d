"""Pure text operations: case, trim, truncate, slugify, counts and a time-bounded regex search."""

from __future__ import annotations

import time
import unicodedata
from typing import Any

import regex

MAX_TEXT_CHARS = 100_000
MAX_PATTERN_CHARS = 500
MAX_MATCHES = 1_000
DEFAULT_MATCHES = 100
DEFAULT_ELLIPSIS = "…"
REGEX_TIMEOUT_S = 0.5
# Matched text returned in one answer, across all matches and groups.
MAX_OUTPUT_CHARS = 200_000
# The `regex` package expands counted repeats when it compiles: `(?:(?:a{100}){100}){100}` takes
# hundreds of MB before any timeout applies. Bound the expansion conservatively: the pattern's
# length times the product of every number written inside braces, wherever it stands.
MAX_PATTERN_EXPANSION = 500_000

FLAGS: dict[str, int] = {
    "ignorecase": regex.IGNORECASE,
    "multiline": regex.MULTILINE,
    "dotall": regex.DOTALL,
}
_WORD = regex.compile(r"\w+(?:['’-]\w+)*")
_BRACES = regex.compile(r"\{([^{}]*)\}")
_DIGITS = regex.compile(r"\d+")
# Inline verbose mode and version-1 syntax change what braces, brackets and `#` mean; refused so
# the expansion estimate above stays an upper bound.
_RISKY_INLINE_FLAGS = regex.compile(r"\(\?[-a-zA-Z0-9]*[xV]")


class TextError(ValueError):
    """A text operation that cannot be done: a bad pattern, a regex timeout, a bad parameter."""


def upper(text: str) -> str:
    return text.upper()


def lower(text: str) -> str:
    return text.lower()


def title(text: str) -> str:
    """Capitalize each word; unlike str.title, "don't" stays "Don't" (not "Don'T")."""
    return _WORD.sub(lambda m: m.group(0)[:1].upper() + m.group(0)[1:].lower(), text)


def trim(text: str) -> str:
    return text.strip()


def truncate(text: str, max_length: int, ellipsis: str = DEFAULT_ELLIPSIS) -> tuple[str, bool]:
    """At most `max_length` code points, the ellipsis included; (text, was it truncated)."""
    if max_length < 0:
        raise TextError("max_length must be >= 0")
    if len(text) <= max_length:
        return text, False
    keep = max(max_length - len(ellipsis), 0)
    return (text[:keep] + ellipsis)[:max_length], True


def slugify(text: str) -> str:
    """ASCII slug: NFKD-normalized, accents dropped, lowercase, runs of other chars -> '-'."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return regex.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")


def word_count(text: str) -> int:
    """Words are runs of letters/digits, joined by inner apostrophes or hyphens (don't, e-mail)."""
    return sum(1 for _ in _WORD.finditer(text))


def char_count(text: str) -> int:
    """Unicode code points."""
    return len(text)


def regex_find(
    text: str,
    pattern: str,
    flags: list[str] | None = None,
    max_matches: int = DEFAULT_MATCHES,
) -> dict[str, Any]:
    """Non-overlapping matches of `pattern`, ending as TextError after REGEX_TIMEOUT_S."""
    if not 1 <= max_matches <= MAX_MATCHES:
        raise TextError(f"max_matches must be between 1 and {MAX_MATCHES}")
    compiled = compile_pattern(pattern, flags or [])
    deadline = time.monotonic() + REGEX_TIMEOUT_S
    matches: list[dict[str, Any]] = []
    budget = MAX_OUTPUT_CHARS
    truncated = False
    try:
        for m in compiled.finditer(text, timeout=REGEX_TIMEOUT_S):
            if len(matches) >= max_matches:
                truncated = True
                break
            groups = list(m.groups())
            budget -= len(m.group(0)) + sum(len(g) for g in groups if g is not None)
            if budget < 0:
                truncated = True
                break
            matches.append(
                {"match": m.group(0), "start": m.start(), "end": m.end(), "groups": groups}
            )
            # The timeout may apply per search step: bound the whole scan as well.
            if time.monotonic() > deadline:
                raise TimeoutError
    except TimeoutError:
        raise TextError(
            f"the regular expression took longer than {REGEX_TIMEOUT_S} s "
            "(catastrophic backtracking?): simplify the pattern"
        ) from None
    return {"matches": matches, "truncated": truncated}


def compile_pattern(pattern: str, flags: list[str]) -> regex.Pattern[str]:
    if not pattern:
        raise TextError("the pattern is empty")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise TextError(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
    if _RISKY_INLINE_FLAGS.search(pattern):
        raise TextError("inline verbose (?x) and version-1 (?V1) flags are not allowed")
    if expansion(pattern) > MAX_PATTERN_EXPANSION:
        raise TextError(
            "the pattern's counted repetitions {n,m} are too large: their product times the "
            f"pattern length must stay within {MAX_PATTERN_EXPANSION}"
        )
    value = 0
    for name in flags:
        if name not in FLAGS:
            raise TextError(f"unknown flag {name!r} (allowed: {', '.join(FLAGS)})")
        value |= FLAGS[name]
    try:
        # cache_pattern=False: the module cache would keep up to 500 compiled patterns alive.
        return regex.compile(pattern, value, cache_pattern=False)
    except regex.error as exc:
        raise TextError(f"invalid pattern: {exc}") from None
    except (RecursionError, MemoryError, OverflowError, ValueError) as exc:
        raise TextError(f"invalid pattern: {exc}") from None


def expansion(pattern: str) -> int:
    """An upper bound of the compiled size: len(pattern) x every brace number multiplied."""
    factor = 1
    for body in _BRACES.findall(pattern):
        numbers = [int(d) for d in _DIGITS.findall(body)]
        factor *= max(numbers, default=1) or 1
        if factor > MAX_PATTERN_EXPANSION:
            return MAX_PATTERN_EXPANSION + 1
    return len(pattern) * factor
