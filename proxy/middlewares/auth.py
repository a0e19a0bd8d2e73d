"""Authentication: every API route needs a valid bearer token; probes and metrics do not."""

from __future__ import annotations

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from proxy import tracing
from proxy.appkeys import IDENTITY, VERIFIER
from proxy.errors import Unauthenticated

PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json"})


@web.middleware
async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path in PUBLIC_PATHS:
        return await handler(request)
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated(
            "a bearer token is required", headers={"WWW-Authenticate": 'Bearer realm="toolproxy"'}
        )
    try:
        with tracing.span("authenticate"):
            identity = request.app[VERIFIER].verify(token.strip())
    except Unauthenticated as exc:
        exc.headers["WWW-Authenticate"] = 'Bearer realm="toolproxy", error="invalid_token"'
        raise
    request[IDENTITY] = identity
    structlog.contextvars.bind_contextvars(
        agent_id=identity.agent_id, team_id=identity.team_id, role=identity.role
    )
    return await handler(request)
