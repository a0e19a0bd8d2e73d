"""Category D `browser.full`: a page on the internet, within the team's egress allowlist."""

from __future__ import annotations

from typing import Any

import asyncpg

from services.browser.egress import team_patterns
from services.browser.page import INPUT_SCHEMA, OUTPUT_SCHEMA, browse
from services.netguard.errors import not_allowed
from services.netguard.fetch import Fetcher
from services.sdk import CallContext, Cost, ToolError
from services.sdk.service import ToolDef, ToolResult, make_manifest

MANIFEST = make_manifest(
    {
        "tool_id": "browser.full",
        "version": "1.0.0",
        "category": "D",
        "action": "read",
        "description": "Fetch one internet page (text/html or text/plain), without JavaScript, "
        "from a host on your team's egress allowlist (kept by governance): its title, readable "
        "text and links. Never private, loopback, link-local or metadata addresses. Each call "
        "waits for a governance approval.",
        "input_schema": INPUT_SCHEMA,
        "output_schema": OUTPUT_SCHEMA,
        "cost": Cost(per_call=0.002, per_compute_unit=0.002),
        "network": True,
        "requires_approval": True,
        "timeout_ms": 10_000,
    }
)


def tool(fetcher: Fetcher, pool: asyncpg.Pool) -> ToolDef:
    """browser.full: the team's allowlist is read from Postgres on every call (a change
    applies to the next call), and only public addresses are ever reached."""

    async def handle(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        if not ctx.team_id:
            raise ToolError("the call carries no team")
        allowlist = await team_patterns(pool, ctx.team_id)
        if not allowlist:
            raise not_allowed("your team has no egress allowlist (governance sets one)")
        return await browse(fetcher, args, ctx, allowlist, internal_ok=False)

    return ToolDef(manifest=MANIFEST, handler=handle)
