"""Origin check on /mcp and the tool sets' /mcp/sets/<name> (MCP streamable HTTP: DNS
rebinding): a request carrying an Origin not allowed is answered 403 before anything else;
requests without Origin are unaffected."""

from __future__ import annotations

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

from proxy.web.keys import ORIGINS, METRICS
from proxy.web.wellknown import is_mcp
from proxy.web.mcp.protocol import INVALID_REQUEST, McpError, error_message

_FORBIDDEN = orjson.dumps(error_message(None, McpError(INVALID_REQUEST, "Forbidden: Origin not allowed")))


@web.middleware
async def mcp_origin(request: web.Request, handler: Handler) -> web.StreamResponse:
    origin = request.headers.get("Origin")
    if origin is not None and is_mcp(request.path) and not request.app[ORIGINS].allows(origin):
        request.app[METRICS].errors.labels(reason="origin_not_allowed").inc()
        return web.Response(status=403, body=_FORBIDDEN, content_type="application/json")
    return await handler(request)
