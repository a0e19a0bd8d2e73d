"""The console's own API: the live approvals inbox (server-sent events), the policy view, the
catalog's names and the upstreams' tools by state. Governance and admin only, by bearer token
or console session."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import orjson
from aiohttp import web

from proxy.web.console.keys import CONSOLE, CONSOLE_SESSION
from proxy.web.keys import CATALOG, POOL, SETTINGS, identity_of
from proxy.errors import TooManyStreams
from proxy.web.console.auth import cookie_secret
from proxy.web.console.approvals_inbox import details, open_approvals
from proxy.web.console.policy_view import policy_view
from proxy.web.console.session import Session, postgres
from proxy.identity.identity import Identity
from proxy.web.access import governed_team, require_governance
from proxy.web.responses import json_response

routes = web.RouteTableDef()

MAX_STREAMS = 200  # per process
KEEPALIVE_S = 15.0
SESSION_CHECK_S = 5.0  # a stream opened by a session ends soon after the session does


def _sse(event: str, data: Any) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (event.encode(), orjson.dumps(data))


def _now() -> datetime:
    return datetime.now(timezone.utc)


@routes.get("/console/api/inbox/stream")
async def inbox_stream(request: web.Request) -> web.StreamResponse:
    """`snapshot` (every open approval, newest first, with the server's time), then `added`
    (one new approval) and `removed` (decided, expired, cancelled) as they happen."""
    identity = identity_of(request)
    team = governed_team(request, identity)  # governance: its own team; admins: all or one
    hub = request.app[CONSOLE].hub
    if hub.streams >= MAX_STREAMS:
        raise TooManyStreams("too many open inboxes on this replica; retry shortly")
    hub.streams += 1
    try:
        return await _stream(request, identity, team)
    finally:
        hub.streams -= 1


async def _stream(request: web.Request, identity: Identity, team: str | None) -> web.StreamResponse:
    app = request.app
    hub, pool, catalog = app[CONSOLE].hub, app[POOL], app[CATALOG]
    session: Session | None = request.get(CONSOLE_SESSION)
    resp = web.StreamResponse(headers={
        "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    await resp.prepare(request)
    ends = time.monotonic() + app[SETTINGS].events_stream_max_s
    last_write = last_check = time.monotonic()
    shown: dict[str, datetime] | None = None
    while time.monotonic() < ends:
        ticket = hub.ticket(team)
        current = await open_approvals(pool, team)
        chunks: list[bytes] = []
        if shown is None:
            items = await details(pool, catalog, list(current))
            chunks.append(_sse("snapshot", {"now": _now().isoformat(), "approvals": items}))
        else:
            chunks += [_sse("removed", {"approval_id": a}) for a in shown if a not in current]
            # Oldest first, so each lands on top of the inbox in order.
            new = [a for a in reversed(current) if a not in shown]
            chunks += [_sse("added", {"now": _now().isoformat(), "approval": item})
                       for item in await details(pool, catalog, new)]
        shown = current
        now = time.monotonic()
        if chunks:
            await resp.write(b"".join(chunks))
            last_write = now
        elif now - last_write >= KEEPALIVE_S:
            await resp.write(b": keepalive\n\n")
            last_write = now
        if session is not None and now - last_check >= SESSION_CHECK_S:
            last_check = now
            if await app[CONSOLE].sessions.get(cookie_secret(request)) is None:
                await resp.write(_sse("ended", {"reason": "session_ended"}))
                break
        # Wake for the next change, the next expiry among those shown, or a keepalive.
        wait = min(KEEPALIVE_S, SESSION_CHECK_S if session is not None else KEEPALIVE_S,
                   ends - time.monotonic())
        if shown:
            soonest = min(shown.values())
            wait = min(wait, max(0.0, (soonest - _now()).total_seconds()) + 0.01)
        await hub.wait(ticket, max(0.0, wait))
    return resp


@routes.get("/console/api/policy")
async def policy(request: web.Request) -> web.Response:
    require_governance(identity_of(request), None)
    return json_response(200, await policy_view(request))


@routes.get("/console/api/catalog")
async def catalog(request: web.Request) -> web.Response:
    """Every tool's name and class, for the console's forms (grants, overrides, rules)."""
    require_governance(identity_of(request), None)
    tools = sorted(request.app[CATALOG].manifests(), key=lambda m: m.tool_id)
    return json_response(200, {"tools": [
        {"tool_id": m.tool_id, "category": m.category, "action": m.action,
         "requires_approval": m.requires_approval} for m in tools]})


# One row per upstream and state (the upstream bridge's table, migration 0106).
_TOOL_STATES = """SELECT upstream, state, count(*)::int AS n FROM upstream_tools
                  GROUP BY upstream, state ORDER BY upstream LIMIT 5000"""


@routes.get("/console/api/upstreams/tool-states")
async def upstream_tool_states(request: web.Request) -> web.Response:
    """How many of each upstream's tools are candidates, classified, changed or gone, for the
    upstreams page's list (one read instead of one per upstream)."""
    require_governance(identity_of(request), None)
    counts: dict[str, dict[str, int]] = {}
    with postgres("the upstreams' tools"):
        for r in await request.app[POOL].fetch(_TOOL_STATES):
            counts.setdefault(r["upstream"], {})[r["state"]] = r["n"]
    return json_response(200, {"upstreams": counts})
