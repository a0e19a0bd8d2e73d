"""Authentication: every API route needs a valid bearer token (or, for the console's own
requests to governance routes, its session: proxy/web/console/auth.py); probes, metrics, the
console's page and the OAuth metadata do not. A missing or refused token is answered 401 with a
`WWW-Authenticate` challenge that points to the protected resource metadata (and names the scope
/mcp needs); a provider's token without that scope is 403 `insufficient_scope`."""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from infra import log_context, tracing
from proxy.errors import Unauthenticated
from proxy.identity.errors import InsufficientScope
from proxy.web import wellknown
from proxy.web.console.auth import cookie_secret, is_public, session_identity
from proxy.web.keys import IDENTITY, VERIFIER

PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json"}) | wellknown.PUBLIC


@web.middleware
async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path in PUBLIC_PATHS or is_public(request.path):
        return await handler(request)
    header = request.headers.get("Authorization", "")
    if not header and cookie_secret(request) is not None and not wellknown.is_mcp(request.path):
        identity = await session_identity(request)
        request[IDENTITY] = identity
        log_context.add(agent_id=identity.agent_id, team_id=identity.team_id, role=identity.role,
                        console=True)
        return await handler(request)
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("a bearer token is required",
                              headers={"WWW-Authenticate": wellknown.challenge(request)})
    try:
        with tracing.span("authenticate"):
            identity = await request.app[VERIFIER].verify(token.strip())
    except Unauthenticated as exc:
        exc.headers["WWW-Authenticate"] = wellknown.challenge(request, error="invalid_token")
        raise
    wanted = wellknown.missing_scope(request, identity)
    if wanted is not None:
        raise InsufficientScope(
            f"this token lacks the scope {wanted!r} that {request.path} needs",
            headers={"WWW-Authenticate": wellknown.challenge(request, error="insufficient_scope",
                                                             scope=wanted)})
    request[IDENTITY] = identity
    log_context.add(agent_id=identity.agent_id, team_id=identity.team_id, role=identity.role)
    return await handler(request)
