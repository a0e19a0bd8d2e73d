"""Wiring the console into the app: the resources it owns (its routes are in routes.py and
api.py, added with the others by the app factory)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from proxy.appkeys import CONSOLE, LISTENER, POOL, SETTINGS
from proxy.console import assets
from proxy.console.guard import RateGuard
from proxy.console.hub import ApprovalHub
from proxy.console.session import SessionStore
from proxy.console.state import Console
from proxy.limits.gcra import Rate


async def _console(app: web.Application) -> AsyncIterator[None]:
    s = app[SETTINGS]
    hub = ApprovalHub(app[LISTENER])
    await hub.start()
    app[CONSOLE] = Console(
        sessions=SessionStore(app[POOL]),
        guard=RateGuard(app[POOL], Rate(per_minute=s.console_mutations_per_minute,
                                        burst=s.console_mutations_burst)),
        hub=hub,
        assets=assets.load(),
    )
    yield


def setup(app: web.Application) -> None:
    """After the Postgres context (it needs the pool and the listener)."""
    app.cleanup_ctx.append(_console)
