"""Typed keys for what the console owns (set by its own cleanup context, proxy/web/console/app.py)."""

from __future__ import annotations

from aiohttp import web

from proxy.web.console.session import Session
from proxy.web.console.state import Console

CONSOLE = web.AppKey("console", Console)
CONSOLE_SESSION = web.RequestKey("console_session", Session)  # when a session authenticated
