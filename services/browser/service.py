"""The browser service: browser.lite over the operator's internal allowlist, browser.full over
the team's egress allowlist, each with its own guard and HTTP session."""

from __future__ import annotations

from typing import Any

import asyncpg

from services.browser import manifests, store
from services.browser.page import browse
from services.netguard.errors import UrlNotAllowed
from services.netguard.fetch import Fetcher
from services.netguard.guard import Guard
from services.netguard.hosts import HostPattern
from services.netguard.settings import NetOptions
from services.sdk import CallContext, Service, ToolError
from services.sdk.service import ToolDef, ToolResult


def lite_tool(fetcher: Fetcher, allowlist: list[HostPattern]) -> ToolDef:
    """browser.lite over the operator's TOOLPROXY_BROWSER_LITE_HOSTS (empty: nothing)."""

    async def handle(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        return await browse(fetcher, args, ctx, allowlist, internal_ok=True)

    return ToolDef(manifest=manifests.LITE, handler=handle)


def full_tool(fetcher: Fetcher, pool: asyncpg.Pool) -> ToolDef:
    """browser.full: the team's allowlist is read from Postgres on every call (a change
    applies to the next call), and only public addresses are ever reached."""

    async def handle(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        if not ctx.team_id:
            raise ToolError("the call carries no team")
        allowlist = await store.team_patterns(pool, ctx.team_id)
        if not allowlist:
            raise UrlNotAllowed("your team has no egress allowlist (governance sets one)")
        return await browse(fetcher, args, ctx, allowlist, internal_ok=False)

    return ToolDef(manifest=manifests.FULL, handler=handle)


def service(pool: asyncpg.Pool, options: NetOptions) -> Service:
    """Each tool has its own guard and session: their rules differ, so no connection made
    under browser.lite's rules is ever reused by browser.full."""
    resolver = options.the_resolver()
    lite_fetcher = Fetcher(Guard(resolver), user_agent="toolproxy-browser-lite/1.0")
    full_fetcher = Fetcher(
        Guard(resolver, unsafe_allow_loopback_for_tests=options.unsafe_allow_loopback_for_tests),
        user_agent="toolproxy-browser/1.0",
    )
    return Service(
        name="browser",
        tools=[lite_tool(lite_fetcher, options.settings.lite_patterns()), full_tool(full_fetcher, pool)],
        on_stop=[lite_fetcher.close, full_fetcher.close],
    )
