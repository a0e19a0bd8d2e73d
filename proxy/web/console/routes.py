"""The console's page and files, and its session: POST /console/session exchanges a
governance or admin token for a session cookie (agents: 403), GET reads it back (with the
CSRF token the page sends on every request), DELETE ends it."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

from aiohttp import web
from pydantic import Field

from proxy.web.console.keys import CONSOLE
from proxy.web.keys import SETTINGS, VERIFIER
from proxy.web.body import read_model
from proxy.web.console.assets import respond
from proxy.web.console.auth import cookie_secret, current_session, rate_key
from proxy.web.console.origin import check_origin, host_of
from proxy.web.console.session import COOKIE, SECURE_COOKIE, Session, utc
from proxy.errors import Forbidden, NotFound, Unauthenticated
from proxy.web.responses import json_response
from proxy.core.input_rules import StrictModel

routes = web.RouteTableDef()


class Login(StrictModel):
    token: str = Field(min_length=1, max_length=4096)


# Pages that depend on routes this proxy may not have: the page shows them only when served.
_FEATURES = {"standing_approvals": "/v1/admin/standing-approvals"}


def _session_body(request: web.Request, session: Session) -> dict[str, object]:
    served = {r.canonical for r in request.app.router.resources()}
    i = session.identity
    # Changes to every team's catalog (plugins, upstream tools): the page offers them only to
    # those the API lets make them (it still decides: access.require_platform_governance).
    platform = i.is_admin or (i.is_governance and i.team_id in request.app[SETTINGS].plugin_governors)
    return {**session.as_json(), "features": [f for f, path in _FEATURES.items() if path in served],
            "platform_governance": platform}


@routes.get("/console")
async def page(request: web.Request) -> web.Response:
    return respond(request, request.app[CONSOLE].assets["index.html"])


@routes.get("/console/static/{name}")
async def static(request: web.Request) -> web.Response:
    asset = request.app[CONSOLE].assets.get(request.match_info["name"])
    if asset is None or request.match_info["name"] == "index.html":
        raise NotFound("no such file")
    return respond(request, asset)


def _secure(request: web.Request) -> bool:
    """TLS as the browser sees it: this connection, or the page's own https Origin (behind a
    proxy that terminates TLS)."""
    return request.secure or urlsplit(request.headers.get("Origin", "")).scheme == "https"


@routes.post("/console/session")
async def login(request: web.Request) -> web.Response:
    check_origin(request)  # no login from another site's page (login CSRF)
    body = await read_model(request, Login)
    identity, token_expires = await request.app[VERIFIER].verify_until(body.token.strip())
    if not identity.is_governance:
        raise Forbidden("the console is for governance and admin tokens; agents' tokens are refused")
    console = request.app[CONSOLE]
    await console.guard.take(rate_key(identity))
    await console.guard.sweep()
    now = time.time()
    expires = min(token_expires, now + request.app[SETTINGS].console_session_ttl_s)
    secret, session = await console.sessions.open(identity, host=host_of(request),
                                                  expires_at=utc(expires))
    response = json_response(201, _session_body(request, session))
    secure = _secure(request)
    response.set_cookie(SECURE_COOKIE if secure else COOKIE, secret, path="/",
                        max_age=max(1, int(expires - now)), httponly=True, secure=secure,
                        samesite="Strict")
    return response


@routes.get("/console/session")
async def whoami(request: web.Request) -> web.Response:
    """The session and its CSRF token, for the page (a reload keeps the session). Only the
    cookie's holder reads it, and only from its own Host; other sites' pages cannot read
    the answer (no CORS) and do not send the cookie (SameSite=Strict)."""
    if request.headers.get("Sec-Fetch-Site") not in (None, "same-origin", "none"):
        raise Forbidden("the console's session is read by its own pages only")
    session = await request.app[CONSOLE].sessions.get(cookie_secret(request))
    if session is None or host_of(request) != session.host:
        raise Unauthenticated("no console session: log in with a governance or admin token")
    return json_response(200, _session_body(request, session))


@routes.delete("/console/session")
async def logout(request: web.Request) -> web.Response:
    await current_session(request, mutation=True)
    await request.app[CONSOLE].sessions.close(cookie_secret(request))
    response = json_response(200, {"ended": True})
    for name in (COOKIE, SECURE_COOKIE):
        if name in request.cookies:
            response.del_cookie(name, path="/", secure=name == SECURE_COOKIE, httponly=True,
                                samesite="Strict")
    return response
