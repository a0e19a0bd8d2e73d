"""The request's root span (installed only when tracing is configured: see infra.tracing)."""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from infra import tracing


@web.middleware
async def trace_request(request: web.Request, handler: Handler) -> web.StreamResponse:
    route = request.match_info.route.resource.canonical if request.match_info.route.resource else "unmatched"
    with tracing.server_span(f"{request.method} {route}", **{
            "http.request.method": request.method, "url.path": request.path}) as root:
        response = await handler(request)
        if root is not None:
            root.set_attribute("http.response.status_code", response.status)
        return response
