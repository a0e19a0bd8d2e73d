"""Input rules at the boundary: strict request models, 64-bit integers, finite numbers, no NUL.

Postgres refuses NUL in text and jsonb, and bigint stops at 2**63-1; orjson cannot write an
integer beyond 64 bits and turns a non-finite float into null. So every request is held to
what can be stored exactly, before anything runs: a JSON body is scanned once, as text, with
compiled patterns (a NUL escape is refused outright; a long digit run, a large exponent or a
NaN/Infinity token is rare and only then is the body walked value by value).
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
)

from pdp.data.grants import CAPABILITY_RE
from wire.manifest import TOOL_NAME_MAX, TOOL_NAME_RE

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# A NUL escape in JSON text: `\u0000` preceded by an odd number of backslashes (an even
# number is an escaped backslash followed by the letters "u0000"). A raw NUL byte is not
# valid JSON: the parsers refuse it already.
_NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
# What could be an integer beyond 64 bits (19+ digits), a float that overflows to infinity
# (3+ exponent digits, or 19+ digits), or a NaN/Infinity token (pydantic's parser takes them):
# digits folded to "0" and "E" to "e" in one C pass, then plain substring searches, each
# behind a cheaper one (no "000" in the folded text: no long number at all). Several times
# faster than one regex with alternatives: bench/inputs.py.
_FOLD = bytes.maketrans(b"123456789E", b"000000000e")
_SUSPECTS = (b"0" * 19, b"e000", b"e+000", b"e-000")

NUL_MESSAGE = "NUL characters (\\u0000) are not accepted"
INT_MESSAGE = "integers must fit in 64 bits (signed)"


def describe(exc: ValidationError) -> str:
    """A validation error in one line: where, what, and how many more."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def json_text_problem(text: bytes | str) -> str | None:
    """Why this JSON text may not be taken (a NUL, an integer beyond 64 bits, a non-finite
    number), or None."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    if b"\\u0000" in data and _NUL_ESCAPE.search(data) is not None:
        return NUL_MESSAGE
    if not (_long_number(data) or (b"N" in data and b"NaN" in data)
            or (b"I" in data and b"Infinity" in data)):
        return None
    try:
        value = json.loads(text)  # exact integers, and NaN/Infinity/1e400 as floats
    except json.JSONDecodeError:
        return None  # not JSON: the parser in charge of this text says so in its own words
    except RecursionError:
        return "the JSON is nested too deeply"
    except ValueError:  # an integer too long to convert (over 4300 digits)
        return INT_MESSAGE
    return value_problem(value)


def _long_number(data: bytes) -> bool:
    folded = data.translate(_FOLD)
    return b"000" in folded and any(s in folded for s in _SUSPECTS)


def value_problem(value: Any) -> str | None:
    """The same rules over a parsed JSON value (iterative: no recursion limit to hit)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, int):
            if not INT64_MIN <= v <= INT64_MAX:
                return INT_MESSAGE
        elif isinstance(v, float):
            if not math.isfinite(v):
                return "numbers must be finite (no NaN, Infinity or overflowing exponents)"
        elif isinstance(v, str):
            if "\x00" in v:
                return NUL_MESSAGE
        elif isinstance(v, dict):
            for k, item in v.items():
                if isinstance(k, str) and "\x00" in k:
                    return NUL_MESSAGE
                stack.append(item)
        elif isinstance(v, list):
            stack.extend(v)
    return None


def _utc(value: datetime) -> datetime:
    try:
        return value.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        raise ValueError("the time is out of range") from None


def _integral(value: Any) -> Any:
    # JSON has one number type, and JSON Schema counts 5.0 as an integer: so does the server.
    # Anything else (5.5, "5", true) goes on to the strict check and is refused there.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def bounded_int(*, ge: int | None = None, gt: int | None = None, le: int = INT64_MAX) -> Any:
    """An integer within bounds (5.0 counts). The bounds come first so that the document
    states them as JSON Schema (minimum/maximum) under the validator."""
    return Annotated[int, Field(ge=ge, gt=gt, le=le), BeforeValidator(_integral)]


# Request-side types: what the document states, the server enforces.
Int64 = bounded_int(ge=INT64_MIN)
Count = bounded_int(ge=0)
TimeoutMs = bounded_int(gt=0, le=60_000)
PerMinute = bounded_int(ge=0, le=1_000_000)
Amount = Annotated[float, Field(ge=0, le=1e300)]  # finite (models refuse inf/nan)
Timestamp = Annotated[AwareDatetime, AfterValidator(_utc)]


class StrictModel(BaseModel):
    """Base of every request body: strict types (no "0" for false, no false for 0.0),
    finite floats, unknown keys refused (subclasses may relax `extra`)."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)


def _anchored(pattern: str) -> str:
    # For pydantic `pattern=` (searches, \z-strict in its Rust engine): anchored.
    return f"^(?:{pattern})$"


# The shapes the server enforces, stated in the document (schemas and parameters).
TOOL_NAME_PATTERN = _anchored(TOOL_NAME_RE.pattern)
TOOL_NAME_SCHEMA: dict[str, Any] = {"pattern": TOOL_NAME_PATTERN, "maxLength": TOOL_NAME_MAX}
CAPABILITY_PATTERN = _anchored(CAPABILITY_RE.pattern)
