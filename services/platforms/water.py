"""Category D Water Union: `water.usage.read` (a meter's litres) and `water.valve.set` (open or
close one of the team's valves; the policy keeps it from agents, like GREENFOOD's set_price)."""

from __future__ import annotations

from typing import Any

import asyncpg

from services.platforms.platform import (
    ID,
    platform_service,
    read_meter,
    readings_input,
    readings_output,
)
from services.sdk import CallContext, Cost, Service, ToolError
from services.sdk.service import ToolResult, make_manifest

USAGE = make_manifest({
    "tool_id": "water.usage.read",
    "version": "1.0.0",
    "category": "D",
    "action": "read",
    "description": "Water Union: a water meter of your team. {meter_id} gives the latest reading; "
    "{meter_id, from, to?} the readings in that range (at most 31 days), in litres per interval.",
    "input_schema": readings_input("Water Union meter reading"),
    "output_schema": readings_output("liters"),
    "cost": Cost(per_call=0.001),
    "network": False,
    "requires_approval": True,
    "timeout_ms": 5_000,
})

VALVE = make_manifest({
    "tool_id": "water.valve.set",
    "version": "1.0.0",
    "category": "D",
    "action": "write",
    "description": "Water Union: open or close one of your team's valves (operators only).",
    "input_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["valve_id", "open"],
        "properties": {"valve_id": ID, "open": {"type": "boolean"}},
    },
    "output_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["valve_id", "open", "changed"],
        "properties": {"valve_id": {"type": "string"}, "open": {"type": "boolean"},
                       "changed": {"type": "boolean"}},
    },
    "cost": Cost(per_call=0.01),
    "network": False,
    "requires_approval": True,
    "timeout_ms": 5_000,
})


async def _usage(conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext) -> ToolResult:
    return await read_meter(conn, args, ctx, platform="water", unit="L", unit_key="liters")


async def _valve(conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext) -> ToolResult:
    valve_id: str = args["valve_id"]
    want = bool(args["open"])
    was = await conn.fetchval(
        "SELECT open FROM platform_valves WHERE valve_id = $1 AND team_id = $2 FOR UPDATE",
        valve_id, ctx.team_id)
    if was is None:
        raise ToolError(f"no valve {valve_id!r} for this team", code="unknown_valve")
    if was != want:
        await conn.execute(
            "UPDATE platform_valves SET open = $2, updated_by = $3, updated_at = now() WHERE valve_id = $1",
            valve_id, want, f"{ctx.agent_id}@{ctx.team_id}")
    return ToolResult(output={"valve_id": valve_id, "open": want, "changed": was != want},
                      object_refs=[{"type": "water.valve", "id": valve_id}])


def service(pool: asyncpg.Pool) -> Service:
    return platform_service("waterunion", pool, [(USAGE, _usage), (VALVE, _valve)])
