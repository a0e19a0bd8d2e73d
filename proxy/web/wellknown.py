"""What a client learns before it has a token: the OAuth 2.0 Protected Resource Metadata
(RFC 9728) of the API and of /mcp, the dev issuer's public keys, and the `WWW-Authenticate`
challenges that point to the metadata (the MCP authorization spec)."""

from __future__ import annotations

from aiohttp import web

from proxy.identity.identity import Identity
from proxy.identity.issuers import DEV_NAME, public_url
from proxy.web.keys import SETTINGS, VERIFIER
from proxy.web.responses import json_response

routes = web.RouteTableDef()

PRM = "/.well-known/oauth-protected-resource"
JWKS = "/.well-known/jwks.json"
PUBLIC = frozenset({PRM, PRM + "/mcp", JWKS})


def base_url(request: web.Request) -> str:
    """TOOLPROXY_PUBLIC_URL, else this request's own scheme and Host (which the Host allowlist
    has passed)."""
    configured = public_url(request.app[SETTINGS])
    if configured:
        return configured
    return f"{request.scheme}://{request.host}"


def is_mcp(path: str) -> bool:
    """/mcp, and the tool sets' /mcp/sets/<name>: parts of one protected resource, /mcp (a
    token for it serves every set: MCP clients take a parent resource's token for its paths)."""
    return path == "/mcp" or path.startswith("/mcp/")


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def challenge(request: web.Request, *, error: str | None = None, scope: str | None = None) -> str:
    """`Bearer` with the metadata's address (RFC 9728 §5.1) and, on /mcp, the scope to ask for."""
    mcp = is_mcp(request.path)
    params = [f"realm={_quoted('toolproxy')}",
              f"resource_metadata={_quoted(base_url(request) + PRM + ('/mcp' if mcp else ''))}"]
    wanted = scope if scope is not None else (request.app[SETTINGS].mcp_scope if mcp else "")
    if wanted:
        params.append(f"scope={_quoted(wanted)}")
    if error is not None:
        params.append(f"error={_quoted(error)}")
    return "Bearer " + ", ".join(params)


def missing_scope(request: web.Request, identity: Identity) -> str | None:
    """The scope a provider's token lacks for this route (only /mcp asks one), or None. The
    dev issuer's tokens carry no scopes and are let through (their role and team are the
    admin's choice at minting)."""
    wanted = request.app[SETTINGS].mcp_scope
    if not wanted or not is_mcp(request.path) or identity.issuer == DEV_NAME:
        return None
    return None if wanted in identity.scopes else wanted


def _metadata(request: web.Request, resource: str) -> dict[str, object]:
    verifier = request.app[VERIFIER]
    scope = request.app[SETTINGS].mcp_scope
    return {
        "resource": resource,
        "authorization_servers": [p.issuer for p in verifier.providers],
        "scopes_supported": [scope] if scope else [],
        "bearer_methods_supported": ["header"],
        "resource_name": "Toolproxy",
        "resource_documentation": f"{base_url(request)}/openapi.json",
    }


@routes.get(PRM)
async def resource_metadata(request: web.Request) -> web.Response:
    return json_response(200, _metadata(request, base_url(request)),
                         {"Cache-Control": "public, max-age=300"})


@routes.get(PRM + "/mcp")
async def mcp_resource_metadata(request: web.Request) -> web.Response:
    return json_response(200, _metadata(request, base_url(request) + "/mcp"),
                         {"Cache-Control": "public, max-age=300"})


@routes.get(JWKS)
async def jwks(request: web.Request) -> web.Response:
    """The dev issuer's public keys (its HS256 keys, being secrets, are never here)."""
    return json_response(200, request.app[VERIFIER].jwks(), {"Cache-Control": "public, max-age=300"})
