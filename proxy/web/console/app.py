"""Wiring the console into the app: the resources it owns (its routes are in routes.py and
api.py, added with the others by the app factory)."""

from __future__ import annotations

from aiohttp import web

from infra.lifecycle import Parts
from infra.wakeups import TeamWakeups
from pdp.data.approvals import CHANNEL as APPROVALS
from proxy.web.console.keys import CONSOLE
from proxy.web.keys import LISTENER, POOL, SETTINGS
from proxy.web.parts import owning
from proxy.web.console import assets
from proxy.web.console.guard import RateGuard
from proxy.web.console.session import SessionStore
from proxy.web.console.state import Console
from proxy.core.limits.gcra import Rate


async def _console(app: web.Application, parts: Parts) -> None:
    s = app[SETTINGS]
    # A trigger NOTIFYs every change of an approval, from whichever replica or command.
    hub = await parts.start("approval_wakeups", TeamWakeups(app[LISTENER], APPROVALS))
    app[CONSOLE] = Console(
        sessions=SessionStore(app[POOL]),
        guard=RateGuard(app[POOL], Rate(per_minute=s.console_mutations_per_minute,
                                        burst=s.console_mutations_burst)),
        hub=hub,
        assets=assets.load(),
    )


def setup(app: web.Application) -> None:
    """After the Postgres context (it needs the pool and the listener)."""
    app.cleanup_ctx.append(owning(_console))
