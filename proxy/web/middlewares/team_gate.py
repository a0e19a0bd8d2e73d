"""Large bodies, paced per team: in each worker, a team's requests with bodies over
TOOLPROXY_LARGE_BODY_BYTES are read at most TOOLPROXY_LARGE_BODY_BYTES_PER_S (after a second's
burst) and handled TOOLPROXY_LARGE_BODIES_PER_TEAM at a time; the others wait unread (the
kernel holds their bytes), so one team's large bodies never take the whole event loop from
other teams' calls. Small requests are never held."""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from proxy.web.keys import IDENTITY, SETTINGS, TEAM_GATE


@web.middleware
async def team_gate(request: web.Request, handler: Handler) -> web.StreamResponse:
    identity = request.get(IDENTITY)
    size = request.content_length
    if (identity is None or not request.body_exists
            or (size is not None and size <= request.app[SETTINGS].large_body_bytes)):
        return await handler(request)
    settings = request.app[SETTINGS]
    async with request.app[TEAM_GATE].hold(identity.team_id, size or settings.max_body_bytes):
        return await handler(request)
