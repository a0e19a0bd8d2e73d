"""What the platform services share: a service whose handlers run in one Postgres transaction,
team-owned meters with readings read over a bounded, validated time range, and the schema
pieces of their tools. The demo data (meters of `team-1`, GREENFOOD's products) is seeded by
the migrations 0001 and 0061."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import asyncpg

from services.sdk import CallContext, Service, ToolError
from services.sdk.manifest import ToolManifest
from services.sdk.service import ToolDef, ToolResult

LOCK_TIMEOUT_MS = 2_000
MAX_RANGE = timedelta(days=31)
MAX_READINGS = 1_000

ID = {"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,63}$", "maxLength": 64}
TIME = {
    "type": "string",
    "maxLength": 40,
    "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?(Z|[+-][0-9]{2}:[0-9]{2})$",
    "description": "ISO 8601 date-time with a UTC offset",
}

PlatformHandler = Callable[[asyncpg.Connection, dict[str, Any], CallContext],
                           Awaitable["dict[str, Any] | ToolResult"]]


def platform_service(name: str, pool: asyncpg.Pool,
                     tools: list[tuple[ToolManifest, PlatformHandler]]) -> Service:
    """A service whose every call runs in one transaction: all of it happens or none."""

    def bind(handle: PlatformHandler) -> Callable[[dict[str, Any], CallContext], Awaitable[Any]]:
        async def run(args: dict[str, Any], ctx: CallContext) -> dict[str, Any] | ToolResult:
            if not ctx.team_id or not ctx.agent_id:
                raise ToolError("the call carries no team or agent")
            try:
                async with pool.acquire() as conn, conn.transaction():
                    await conn.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
                    return await handle(conn, args, ctx)
            except asyncpg.LockNotAvailableError:
                raise ToolError("the record is busy; try again", code="busy") from None

        return run

    return Service(name=name, tools=[ToolDef(manifest=m, handler=bind(h)) for m, h in tools])


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
        raise ToolError(f"`{name}` is not a valid date-time", code="invalid_range") from None
    if at.tzinfo is None:
        raise ToolError(f"`{name}` needs a UTC offset", code="invalid_range")
    return at.astimezone(timezone.utc)


def time_range(args: dict[str, Any], now: datetime | None = None) -> tuple[datetime, datetime] | None:
    """None for "the latest reading"; else [from, to], at most MAX_RANGE long."""
    if "from" not in args:
        if "to" in args:
            raise ToolError("`to` needs `from`", code="invalid_range")
        return None
    start = _instant(args["from"], "from")
    end = _instant(args["to"], "to") if "to" in args else (now or datetime.now(timezone.utc))
    if start >= end:
        raise ToolError("`from` must be before `to`", code="invalid_range")
    if end - start > MAX_RANGE:
        raise ToolError(f"the range is longer than {MAX_RANGE.days} days", code="range_too_large")
    return start, end


async def read_meter(conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext, *,
                     platform: str, unit: str, unit_key: str) -> ToolResult:
    """The team's own meter only: another team's meter is as unknown as a missing one."""
    meter_id: str = args["meter_id"]
    window = time_range(args)
    owner = await conn.fetchval(
        "SELECT team_id FROM platform_meters WHERE meter_id = $1 AND platform = $2", meter_id, platform)
    if owner != ctx.team_id:
        raise ToolError(f"no {platform} meter {meter_id!r} for this team", code="unknown_meter")
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
