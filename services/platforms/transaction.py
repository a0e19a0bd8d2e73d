"""A platform service: every call of its tools runs in one Postgres transaction, all of it or
none; a row another call holds past the lock timeout answers busy (the proxy: retry)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from services.sdk import CallContext, Service, ToolError
from services.sdk.errors import Busy
from services.sdk.service import ToolDef, ToolResult
from wire.manifest import ToolManifest

LOCK_TIMEOUT_MS = 2_000

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
                raise Busy("the record is busy; try again") from None

        return run

    return Service(name=name, tools=[ToolDef(manifest=m, handler=bind(h)) for m, h in tools])
