"""How a console session authenticates API requests. Only the console's own requests: the
session cookie is taken only with the CSRF header, only on governance routes, and only from
the exact Host it was opened on; a mutation also needs this console's Origin and passes the
per-identity rate guard. A cookie alone authorizes nothing. Bearer tokens are unaffected
(a request with an Authorization header never reads the cookie)."""

from __future__ import annotations

from aiohttp import web

from proxy.web.console.keys import CONSOLE, CONSOLE_SESSION
from proxy.web.console.errors import CsrfFailed
from proxy.web.console.guard import CSRF_HEADER, SAFE_METHODS, check_csrf
from proxy.web.console.origin import check_origin, host_of
from proxy.web.console.session import COOKIE, SECURE_COOKIE, Session
from proxy.errors import Unauthenticated
from proxy.identity.identity import Identity

# Routes the console's pages use; everything else (invoking tools, MCP, resuming calls...)
# needs a bearer token, whatever cookie comes with it.
_SCOPE_PATHS = frozenset({"/v1/approvals", "/v1/usage"})
_SCOPE_PREFIXES = ("/console/api/", "/v1/approvals/", "/v1/admin/")
# Served without authentication (the page, its files) or authenticating by themselves (the
# session routes: login takes a token in its body; the provider sign-in: signin.py).
_PUBLIC_PATHS = frozenset({"/console", "/console/session", "/console/signin",
                           "/console/signin/callback", "/console/signin/options"})


def is_public(path: str) -> bool:
    return path in _PUBLIC_PATHS or path.startswith("/console/static/")


def in_scope(path: str) -> bool:
    return path in _SCOPE_PATHS or path.startswith(_SCOPE_PREFIXES)


def cookie_secret(request: web.Request) -> str | None:
    return request.cookies.get(SECURE_COOKIE) or request.cookies.get(COOKIE)


def rate_key(identity: Identity) -> str:
    return identity.actor


async def current_session(request: web.Request, *, mutation: bool) -> Session:
    """The request's session, after the checks that need no session first (Origin, CSRF
    header present), then the Host binding and the CSRF token itself."""
    if mutation or "Origin" in request.headers:
        check_origin(request)
    if not request.headers.get(CSRF_HEADER):
        raise CsrfFailed(f"the console's requests carry the {CSRF_HEADER} header")
    session = await request.app[CONSOLE].sessions.get(cookie_secret(request))
    if session is None:
        raise Unauthenticated("no console session, or it has expired: log in again")
    if host_of(request) != session.host:
        raise Unauthenticated("this console session belongs to another Host")
    check_csrf(request, session.csrf_token)
    return session


async def session_identity(request: web.Request) -> Identity:
    if not in_scope(request.path):
        raise Unauthenticated("this route takes a bearer token (a console session does not reach it)",
                              headers={"WWW-Authenticate": 'Bearer realm="toolproxy"'})
    mutation = request.method not in SAFE_METHODS
    session = await current_session(request, mutation=mutation)
    if mutation:
        await request.app[CONSOLE].guard.take(rate_key(session.identity))
    request[CONSOLE_SESSION] = session
    return session.identity
