"""The EnergyUnion service: energy.meter.read over the team's meters."""

from __future__ import annotations

from typing import Any

import asyncpg

from services.platforms.energy.manifests import MANIFEST
from services.platforms.meters import read_meter
from services.platforms.transaction import platform_service
from services.sdk import CallContext, Service
from services.sdk.service import ToolResult


async def _read(conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext) -> ToolResult:
    return await read_meter(conn, args, ctx, platform="energy", unit="kWh", unit_key="kwh")


def service(pool: asyncpg.Pool) -> Service:
    return platform_service("energyunion", pool, [(MANIFEST, _read)])
