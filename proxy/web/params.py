"""Path and query parameters, read the way the document states them (types, bounds, shapes).

A malformed or out-of-range value is 400 `invalid_request`; a path id that cannot exist is
404, like an id that does not exist. Nothing unchecked reaches Postgres.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime, timezone

from aiohttp import web

from proxy.errors import InvalidRequest, NotFound
from wire.ids import is_valid_id
from proxy.core.input_rules import INT64_MAX

_INTEGER = re.compile(r"0|[1-9][0-9]{0,18}", re.ASCII)  # no sign, spaces, "_" or other digits
UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", re.ASCII)
UUID_PATTERN = "^" + UUID_RE.pattern + "$"
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)


def path_id(request: web.Request, name: str, missing: str) -> str:
    value = request.match_info[name]
    if not is_valid_id(value):
        raise NotFound(missing)
    return value


def path_uuid(request: web.Request, name: str, missing: str) -> str:
    value = request.match_info[name]
    if UUID_RE.fullmatch(value) is None:
        raise NotFound(missing)
    return value


def query_int(query: Mapping[str, str], name: str, default: int, *, lo: int = 0,
              hi: int = INT64_MAX) -> int:
    raw = query.get(name)
    if raw is None:
        return default
    if _INTEGER.fullmatch(raw) is None or not lo <= int(raw) <= hi:
        raise InvalidRequest(f"{name} must be an integer from {lo} to {hi}")
    return int(raw)


def query_id(query: Mapping[str, str], name: str) -> str | None:
    raw = query.get(name)
    if raw is not None and not is_valid_id(raw):
        raise InvalidRequest(f"{name} is not a valid id")
    return raw


def query_uuid(query: Mapping[str, str], name: str) -> str | None:
    raw = query.get(name)
    if raw is not None and UUID_RE.fullmatch(raw) is None:
        raise InvalidRequest(f"{name} must be a UUID")
    return raw


def query_choice(query: Mapping[str, str], name: str, choices: tuple[str, ...],
                 default: str | None = None) -> str | None:
    raw = query.get(name, default)
    if raw is not None and raw not in choices:
        raise InvalidRequest(f"{name} must be one of {', '.join(choices)}")
    return raw


def query_time(query: Mapping[str, str], name: str) -> datetime | None:
    """RFC 3339 date-time with an offset ("Z" or ±hh:mm), as UTC."""
    raw = query.get(name)
    if raw is None:
        return None
    try:
        value = datetime.fromisoformat(raw)
        if value.tzinfo is None or len(raw) > 40:
            raise ValueError
        return value.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        raise InvalidRequest(f"{name} must be a date-time with an offset (RFC 3339)") from None


def query_date(query: Mapping[str, str], name: str) -> date | None:
    raw = query.get(name)
    if raw is None:
        return None
    if _DATE.fullmatch(raw) is None:
        raise InvalidRequest(f"{name} must be YYYY-MM-DD")
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise InvalidRequest(f"{name} must be YYYY-MM-DD") from None
