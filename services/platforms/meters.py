"""A team's meters on a platform and their readings, read over a bounded, validated time range,
and the schema pieces of the tools that read them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import asyncpg

from services.platforms.errors import InvalidRange, RangeTooLarge, UnknownMeter
from services.sdk import CallContext
from services.sdk.service import ToolResult

MAX_RANGE = timedelta(days=31)
MAX_READINGS = 1_000

ID = {"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,63}$", "maxLength": 64}
TIME = {
    "type": "string",
    "maxLength": 40,
    "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?(Z|[+-][0-9]{2}:[0-9]{2})$",
    "description": "ISO 8601 date-time with a UTC offset",
}


def readings_input(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["meter_id"],
        "properties": {
            "meter_id": ID,
            "from": {**TIME, "description": "start (inclusive); without it, the latest reading"},
            "to": {**TIME, "description": "end (inclusive, default now); needs `from`"},
        },
        "description": description,
    }


def readings_output(unit_key: str) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["meter_id", "unit", "readings", "truncated"],
        "properties": {
            "meter_id": {"type": "string"},
            "unit": {"type": "string"},
            "readings": {
                "type": "array",
                "maxItems": MAX_READINGS,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["at", unit_key],
                    "properties": {"at": {"type": "string"}, unit_key: {"type": "number", "minimum": 0}},
                },
            },
            "truncated": {"type": "boolean"},
        },
    }


def _instant(text: str, name: str) -> datetime:
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidRange(f"`{name}` is not a valid date-time") from None
    if at.tzinfo is None:
        raise InvalidRange(f"`{name}` needs a UTC offset")
    return at.astimezone(timezone.utc)


def time_range(args: dict[str, Any], now: datetime | None = None) -> tuple[datetime, datetime] | None:
    """None for "the latest reading"; else [from, to], at most MAX_RANGE long."""
    if "from" not in args:
        if "to" in args:
            raise InvalidRange("`to` needs `from`")
        return None
    start = _instant(args["from"], "from")
    end = _instant(args["to"], "to") if "to" in args else (now or datetime.now(timezone.utc))
    if start >= end:
        raise InvalidRange("`from` must be before `to`")
    if end - start > MAX_RANGE:
        raise RangeTooLarge(f"the range is longer than {MAX_RANGE.days} days")
    return start, end


async def read_meter(conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext, *,
                     platform: str, unit: str, unit_key: str) -> ToolResult:
    """The team's own meter only: another team's meter is as unknown as a missing one."""
    meter_id: str = args["meter_id"]
    window = time_range(args)
    owner = await conn.fetchval(
        "SELECT team_id FROM platform_meters WHERE meter_id = $1 AND platform = $2", meter_id, platform)
    if owner != ctx.team_id:
        raise UnknownMeter(f"no {platform} meter {meter_id!r} for this team")
    if window is None:
        rows = await conn.fetch(
            "SELECT at, value FROM platform_readings WHERE meter_id = $1 ORDER BY at DESC LIMIT 1",
            meter_id)
    else:
        rows = await conn.fetch(
            """SELECT at, value FROM platform_readings WHERE meter_id = $1 AND at >= $2 AND at <= $3
               ORDER BY at LIMIT $4""",
            meter_id, window[0], window[1], MAX_READINGS + 1)
    truncated = len(rows) > MAX_READINGS
    readings = [{"at": r["at"].astimezone(timezone.utc).isoformat(), unit_key: float(r["value"])}
                for r in rows[:MAX_READINGS]]
    return ToolResult(
        output={"meter_id": meter_id, "unit": unit, "readings": readings, "truncated": truncated},
        observations=[{"type": f"{platform}.meter", "id": meter_id, "readings": len(readings)}],
    )
