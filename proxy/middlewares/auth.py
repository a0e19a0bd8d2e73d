"""Authentication: every API route needs a valid bearer token (or, for the console's own
requests to governance routes, its session: proxy/console/auth.py); probes, metrics and the
console's page do not."""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from proxy import tracing
from proxy.appkeys import IDENTITY, VERIFIER
from proxy.console.auth import cookie_secret, is_public, session_identity
from proxy.errors import Unauthenticated
from services.sdk import log_context

PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json"})


@web.middleware
async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path in PUBLIC_PATHS or is_public(request.path):
        return await handler(request)
    header = request.headers.get("Authorization", "")
    if not header and cookie_secret(request) is not None:
        identity = await session_identity(request)
        request[IDENTITY] = identity
        log_context.add(agent_id=identity.agent_id, team_id=identity.team_id, role=identity.role,
                        console=True)
        return await handler(request)
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
    log_context.add(agent_id=identity.agent_id, team_id=identity.team_id, role=identity.role)
    return await handler(request)
