"""Category D `energy.meter.read`: EnergyUnion meter readings (contract `tool.energy.meter.read`)."""

from __future__ import annotations

from typing import Any

import asyncpg

from services.platforms.platform import platform_service, read_meter, readings_input, readings_output
from services.sdk import CallContext, Cost, Service
from services.sdk.service import ToolResult, make_manifest

MANIFEST = make_manifest({
    "tool_id": "energy.meter.read",
    "version": "1.0.0",
    "category": "D",
    "action": "read",
    "description": "EnergyUnion: a meter of your team. {meter_id} gives the latest reading; "
    "{meter_id, from, to?} the readings in that range (at most 31 days), in kWh per interval.",
    "input_schema": readings_input("EnergyUnion meter reading"),
    "output_schema": readings_output("kwh"),
    "cost": Cost(per_call=0.001),
    "network": False,
    "requires_approval": True,
    "timeout_ms": 5_000,
})


async def _read(conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext) -> ToolResult:
    return await read_meter(conn, args, ctx, platform="energy", unit="kWh", unit_key="kwh")


def service(pool: asyncpg.Pool) -> Service:
    return platform_service("energyunion", pool, [(MANIFEST, _read)])
