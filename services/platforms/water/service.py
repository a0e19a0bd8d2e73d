"""The Water Union service: water.usage.read over the team's meters, water.valve.set on its
valves."""

from __future__ import annotations

from typing import Any

import asyncpg

from services.platforms.meters import read_meter
from services.platforms.transaction import platform_service
from services.platforms.water import store
from services.platforms.water.errors import UnknownValve
from services.platforms.water.manifests import USAGE, VALVE
from services.sdk import CallContext, Service
from services.sdk.service import ToolResult


async def _usage(conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext) -> ToolResult:
    return await read_meter(conn, args, ctx, platform="water", unit="L", unit_key="liters")


async def _valve(conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext) -> ToolResult:
    valve_id: str = args["valve_id"]
    want = bool(args["open"])
    was = await store.locked_valve(conn, valve_id, ctx.team_id)
    if was is None:
        raise UnknownValve(f"no valve {valve_id!r} for this team")
    if was != want:
        await store.set_valve(conn, valve_id, want, f"{ctx.agent_id}@{ctx.team_id}")
    return ToolResult(output={"valve_id": valve_id, "open": want, "changed": was != want},
                      object_refs=[{"type": "water.valve", "id": valve_id}])


def service(pool: asyncpg.Pool) -> Service:
    return platform_service("waterunion", pool, [(USAGE, _usage), (VALVE, _valve)])
