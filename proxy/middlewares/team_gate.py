"""Large bodies, a few at a time per team: in each worker, a team's requests with bodies over
TOOLPROXY_LARGE_BODY_BYTES are read and handled TOOLPROXY_LARGE_BODIES_PER_TEAM at a time;
the others wait unread (the kernel holds their bytes), so parsing one team's large bodies
never takes the whole event loop from other teams' calls."""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from proxy.appkeys import IDENTITY, SETTINGS, TEAM_GATE


@web.middleware
async def team_gate(request: web.Request, handler: Handler) -> web.StreamResponse:
    identity = request.get(IDENTITY)
    size = request.content_length
    if (identity is None or not request.body_exists
            or (size is not None and size <= request.app[SETTINGS].large_body_bytes)):
        return await handler(request)
    async with request.app[TEAM_GATE].hold(identity.team_id):
        return await handler(request)
