"""Signing in to the console with the organisation's OpenID provider: the authorization code
flow with PKCE (S256), a `state` and a `nonce`.

GET /console/signin sends the browser to the provider's authorization endpoint, with the
flow's secrets (state, nonce, PKCE verifier, the Host it started on) sealed (AES-GCM, keyed
from what the replicas share) into a short-lived cookie of its own: SameSite=Lax, since the
provider's redirect back is a cross-site navigation, and only under /console/signin. GET
/console/signin/callback checks the state against that cookie, exchanges the code (with the
verifier and the client's secret) at the token endpoint, verifies the ID token (the provider's
keys, the audience this client, the nonce), maps its claims to an identity by the issuer's
mapping (roles included) and opens a console session exactly as the token-paste sign-in does
(hashed, bound to the Host, CSRF token, SameSite=Strict). Only governance and admin
identities get one. Any failure ends at /console with a code the page shows."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from typing import Any
from urllib.parse import urlencode

import orjson
import structlog
from aiohttp import web
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from proxy.errors import ApiError, NotFound, Unauthenticated
from proxy.identity.outbound import FetchError
from proxy.web.console.auth import rate_key
from proxy.web.console.keys import CONSOLE
from proxy.web.console.origin import host_of
from proxy.web.console.session import COOKIE, SECURE_COOKIE, utc
from proxy.web.keys import SETTINGS, VERIFIER
from proxy.web.responses import json_response
from proxy.web.wellknown import base_url

log = structlog.get_logger("toolproxy.console")
routes = web.RouteTableDef()

FLOW_COOKIE = "toolproxy_signin"
SECURE_FLOW_COOKIE = "__Secure-toolproxy_signin"  # (not __Host-: its Path is /console/signin)
FLOW_PATH = "/console/signin"
FLOW_TTL_S = 600
CALLBACK = "/console/signin/callback"
PUBLIC = frozenset({"/console/signin", CALLBACK, "/console/signin/options"})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _box(request: web.Request) -> AESGCM:
    secret = request.app[VERIFIER].session_secret()
    return AESGCM(hashlib.sha256(b"toolproxy-console-signin\0" + secret).digest())


def _seal(request: web.Request, flow: dict[str, Any]) -> str:
    nonce = secrets.token_bytes(12)
    return _b64(nonce + _box(request).encrypt(nonce, orjson.dumps(flow), FLOW_COOKIE.encode()))


def _unseal(request: web.Request, sealed: str | None) -> dict[str, Any] | None:
    if not sealed or len(sealed) > 2048:
        return None
    try:
        raw = _unb64(sealed)
        flow = orjson.loads(_box(request).decrypt(raw[:12], raw[12:], FLOW_COOKIE.encode()))
    except (ValueError, InvalidTag, orjson.JSONDecodeError):
        return None
    if not isinstance(flow, dict) or time.time() - float(flow.get("t", 0)) > FLOW_TTL_S:
        return None
    return flow


def _secure(request: web.Request) -> bool:
    return request.secure or base_url(request).startswith("https://")


def _redirect(location: str, status: int = 303) -> web.Response:
    return web.Response(status=status, headers={"Location": location, "Cache-Control": "no-store"})


def _failed(code: str) -> web.Response:
    """Back to the page, which says what went wrong (no secret in the address)."""
    return _redirect(f"/console?signin_error={code}")


@routes.get("/console/signin/options")
async def options(request: web.Request) -> web.Response:
    """How this console signs in: with a provider, by pasting a token, or both."""
    provider = request.app[VERIFIER].console_provider()
    return json_response(200, {"provider": provider[0].name if provider else None,
                               "token_paste": request.app[SETTINGS].dev_issuer == "on"})


@routes.get("/console/signin")
async def start(request: web.Request) -> web.Response:
    found = request.app[VERIFIER].console_provider()
    if found is None:
        raise NotFound("no identity provider is configured for the console's sign-in "
                       "(TOOLPROXY_OIDC_CLIENT_ID)")
    config, remote = found
    try:
        meta = await remote.provider_metadata()
        endpoint = meta["authorization_endpoint"]
    except (FetchError, KeyError) as exc:
        log.warning("console_signin_unavailable", issuer=config.name, error=str(exc)[:300])
        return _failed("identity_provider_unavailable")
    state, nonce, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(64)
    redirect_uri = base_url(request) + CALLBACK
    query = urlencode({
        "response_type": "code", "client_id": config.client_id, "redirect_uri": redirect_uri,
        "scope": config.console_scopes, "state": state, "nonce": nonce,
        "code_challenge": _b64(hashlib.sha256(verifier.encode("ascii")).digest()),
        "code_challenge_method": "S256",
    })
    sep = "&" if "?" in endpoint else "?"
    response = _redirect(f"{endpoint}{sep}{query}", 302)
    secure = _secure(request)
    flow = {"s": state, "n": nonce, "v": verifier, "h": host_of(request), "r": redirect_uri,
            "t": time.time()}
    response.set_cookie(SECURE_FLOW_COOKIE if secure else FLOW_COOKIE, _seal(request, flow),
                        path=FLOW_PATH, max_age=FLOW_TTL_S, httponly=True, secure=secure,
                        samesite="Lax")
    return response


@routes.get(CALLBACK)
async def callback(request: web.Request) -> web.Response:
    found = request.app[VERIFIER].console_provider()
    if found is None:
        raise NotFound("no identity provider is configured for the console's sign-in")
    config, remote = found
    flow = _unseal(request, request.cookies.get(SECURE_FLOW_COOKIE) or request.cookies.get(FLOW_COOKIE))
    query = request.query
    if flow is None or flow.get("h") != host_of(request):
        return _done(request, _failed("signin_expired"))
    if not hmac.compare_digest(str(query.get("state", "")).encode(), str(flow["s"]).encode()):
        return _done(request, _failed("signin_state_mismatch"))
    if "error" in query or not query.get("code"):
        log.info("console_signin_refused_by_provider", issuer=config.name,
                 error=str(query.get("error", "no code"))[:100])
        return _done(request, _failed("signin_refused"))
    try:
        identity, _ = await _exchange(request, config, remote, query["code"], flow)
    except ApiError as exc:
        log.info("console_signin_failed", issuer=config.name, code=exc.code, error=exc.message[:300])
        return _done(request, _failed(exc.code))
    if not identity.is_governance:
        return _done(request, _failed("agents_not_allowed"))
    console = request.app[CONSOLE]
    try:
        await console.guard.take(rate_key(identity))
        await console.guard.sweep()
        now = time.time()
        expires = now + request.app[SETTINGS].console_session_ttl_s
        secret, _session = await console.sessions.open(identity, host=host_of(request),
                                                       expires_at=utc(expires))
    except ApiError as exc:
        return _done(request, _failed(exc.code))
    log.info("console_signed_in", issuer=config.name, agent_id=identity.agent_id,
             team_id=identity.team_id, role=identity.role)
    response = _redirect("/console")
    secure = _secure(request)
    response.set_cookie(SECURE_COOKIE if secure else COOKIE, secret, path="/",
                        max_age=max(1, int(expires - now)), httponly=True, secure=secure,
                        samesite="Strict")
    return _done(request, response)


def _done(request: web.Request, response: web.Response) -> web.Response:
    """The flow's cookie is spent, whatever happened."""
    for name in (FLOW_COOKIE, SECURE_FLOW_COOKIE):
        if name in request.cookies:
            response.del_cookie(name, path=FLOW_PATH, secure=name == SECURE_FLOW_COOKIE,
                                httponly=True, samesite="Lax")
    return response


async def _exchange(request: web.Request, config: Any, remote: Any, code: str,
                    flow: dict[str, Any]) -> tuple[Any, float]:
    verifier = request.app[VERIFIER]
    try:
        meta = await remote.provider_metadata()
        form = {"grant_type": "authorization_code", "code": code[:4096],
                "redirect_uri": flow["r"], "code_verifier": flow["v"]}
        headers: dict[str, str] = {}
        if config.client_secret:
            basic = f"{_form(config.client_id)}:{_form(config.client_secret)}"
            headers["Authorization"] = "Basic " + base64.b64encode(basic.encode()).decode()
        else:
            form["client_id"] = config.client_id
        got = await verifier.outbound.request_json("POST", meta["token_endpoint"], data=form,
                                                   headers=headers)
    except FetchError as exc:
        raise Unauthenticated(f"the provider did not exchange the code: {exc}") from None
    except KeyError:
        raise Unauthenticated("the provider's discovery document has no token_endpoint") from None
    id_token = got.body.get("id_token")
    if not isinstance(id_token, str):
        raise Unauthenticated("the provider's answer has no ID token (is `openid` in the scopes?)")
    return await verifier.verify_id_token(config.name, id_token, client_id=config.client_id,
                                          nonce=flow["n"])


def _form(value: str) -> str:
    """RFC 6749 2.3.1: the client id and secret are form-urlencoded inside Basic."""
    from urllib.parse import quote

    return quote(value, safe="")
