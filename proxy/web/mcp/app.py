"""Wiring the MCP surface into the app: the resources it owns (its routes are in routes.py)."""

from __future__ import annotations

from aiohttp import web

from infra.lifecycle import Parts
from infra.wakeups import TeamWakeups
from pdp.data.approvals import CHANNEL as APPROVALS
from proxy.web.keys import LISTENER
from proxy.web.mcp.keys import TASK_WAKEUPS
from proxy.web.parts import owning


async def _mcp(app: web.Application, parts: Parts) -> None:
    # A trigger NOTIFYs every change of an approval, from whichever replica or command.
    app[TASK_WAKEUPS] = await parts.start("mcp_task_wakeups", TeamWakeups(app[LISTENER], APPROVALS))


def setup(app: web.Application) -> None:
    """After the Postgres context (it needs the listener)."""
    app.cleanup_ctx.append(owning(_mcp))
