"""Per-route HTTP metrics (tool-level metrics live in the pipeline)."""

from __future__ import annotations

import time

from aiohttp import web
from aiohttp.typedefs import Handler

from proxy.web.keys import METRICS


def _route(request: web.Request) -> str:
    info = request.match_info.route.resource
    return info.canonical if info is not None else "unmatched"


@web.middleware
async def http_metrics(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.perf_counter()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        m = request.app[METRICS]
        route = _route(request)
        m.child(m.http_requests, route, request.method, str(status)).inc()
        m.child(m.http_duration, route, request.method).observe(time.perf_counter() - started)

