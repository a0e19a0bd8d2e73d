"""Typed keys for what the MCP surface owns (set by its cleanup context, proxy/web/mcp/app.py)."""

from __future__ import annotations

from aiohttp import web

from infra.wakeups import TeamWakeups

# Wakes blocking tasks/result readers when an approval of their team changes (any replica).
TASK_WAKEUPS = web.AppKey("mcp_task_wakeups", TeamWakeups)
