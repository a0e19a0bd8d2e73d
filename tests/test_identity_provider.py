"""The proxy trusting a real OpenID provider (oidc-provider, tests/support/oidc/): client
credentials tokens signed RS256 and ES256 call tools, claims map to the identity, tool scopes
narrow what a token may call, the key set follows the provider's own rotation, and /mcp is an
OAuth protected resource that the official MCP SDK's OAuth client reaches by itself."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from aiohttp.test_utils import TestClient

from infra.embedded.ports import free_port
from proxy.config import Settings
from proxy.web import keys as appkeys
from proxy.web.app import create_app
from services.builtin import BUILTIN_TOOLS
from tests.support.calls import bearer, invoke
from tests.support.oidc_provider import RESOURCE, OidcProvider


def provider_settings(settings: Settings, provider: OidcProvider, **over: Any) -> Settings:
    update: dict[str, Any] = {"oidc_issuer": provider.issuer,
                              "oidc_audience": f"{RESOURCE},{RESOURCE}/mcp"}
    update.update(over)
    return Settings(**{**settings.model_dump(), **update})


@pytest.fixture
async def idp_client(aiohttp_client: Callable[..., Any], settings: Settings, builtin: list[Any],
                     oidc_provider: OidcProvider) -> TestClient:
    app = create_app(provider_settings(settings, oidc_provider))
    c: TestClient = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(list(BUILTIN_TOOLS), timeout=10)
    return c


@pytest.mark.parametrize("client_id", ["agent-rs", "agent-es"])
async def test_a_client_credentials_token_calls_a_tool(idp_client, oidc_provider, client_id) -> None:
    tok = await oidc_provider.token(client_id)
    status, body = await invoke(idp_client, tok, "math", {"expr": "6*7"})
    assert status == 200, body
    assert body["status"] == "COMPLETED"
    r = await idp_client.get(f"/v1/calls/{body['call_id']}", headers=bearer(tok))
    call = await r.json()
    assert r.status == 200, call
    metrics = await (await idp_client.get("/metrics")).text()
    assert 'toolproxy_token_verifications_total{issuer="oidc",result="ok"}' in metrics
    assert 'toolproxy_jwks_fetches_total{issuer="oidc",result="ok"}' in metrics


async def test_a_token_without_a_team_claim_is_401_naming_it(idp_client, oidc_provider, bus_spy) -> None:
    tok = await oidc_provider.token("agent-noteam")
    status, body = await invoke(idp_client, tok, "math", {"expr": "1"})
    assert status == 401 and "'team'" in body["error"]["message"], body
    await bus_spy.settle()
    assert bus_spy.subjects == []


async def test_a_token_for_another_audience_is_401_and_never_passed_on(idp_client, oidc_provider,
                                                                       bus_spy) -> None:
    tok = await oidc_provider.token("agent-es", resource="https://another-service.example")
    status, body = await invoke(idp_client, tok, "math", {"expr": "1"})
    assert status == 401 and "audience" in body["error"]["message"], body
    r = await idp_client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                              headers=bearer(tok))
    assert r.status == 401
    assert 'error="invalid_token"' in r.headers["WWW-Authenticate"]
    await bus_spy.settle()
    assert bus_spy.subjects == []


async def test_tool_scopes_limit_the_token_to_those_tools(idp_client, oidc_provider) -> None:
    scoped = await oidc_provider.token("agent-es", scope="mcp tool.math.invoke")
    assert (await invoke(idp_client, scoped, "math", {"expr": "1"}))[0] == 200
    status, body = await invoke(idp_client, scoped, "text", {"op": "upper", "text": "a"})
    assert status == 403 and body["error"]["reasons"] == ["scope_excludes_tool"], body
    listed = await (await idp_client.get("/v1/tools", headers=bearer(scoped))).json()
    assert [t["tool_id"] for t in listed["tools"]] == ["math"]
    unscoped = await oidc_provider.token("agent-es", scope="mcp")
    assert (await invoke(idp_client, unscoped, "text", {"op": "upper", "text": "a"}))[0] == 200


async def test_the_providers_key_rotation_is_followed(idp_client, oidc_provider) -> None:
    old = await oidc_provider.token("agent-es")
    assert (await invoke(idp_client, old, "math", {"expr": "1"}))[0] == 200
    verifier = idp_client.app[appkeys.VERIFIER]
    remote = verifier.remote("oidc")
    await oidc_provider.rotate()
    remote.last_attempt = 0.0  # as if the refetch floor had passed since the last fetch
    new = await oidc_provider.token("agent-es")
    assert (await invoke(idp_client, new, "math", {"expr": "1"}))[0] == 200
    assert (await invoke(idp_client, old, "math", {"expr": "1"}))[0] == 200  # still published
    await oidc_provider.retire()
    assert await remote.refresh()  # the next scheduled refresh
    status, body = await invoke(idp_client, old, "math", {"expr": "1"})
    assert status == 401, body  # rotated away: refused, though it was verified (and cached) before
    assert (await invoke(idp_client, new, "math", {"expr": "1"}))[0] == 200


async def test_readiness_reports_the_key_sets(idp_client) -> None:
    r = await idp_client.get("/readyz")
    body = await r.json()
    assert body["identity"]["oidc"]["state"] == "fresh", body
    assert body["identity"]["dev"]["state"] == "fresh"


# --- /mcp as an OAuth protected resource (the MCP authorization spec) -------------------------


async def test_protected_resource_metadata(idp_client, oidc_provider) -> None:
    base = str(idp_client.make_url("/")).rstrip("/")
    for path, resource in (("/.well-known/oauth-protected-resource", base),
                           ("/.well-known/oauth-protected-resource/mcp", base + "/mcp")):
        r = await idp_client.get(path)
        meta = await r.json()
        assert r.status == 200
        assert meta["resource"] == resource
        assert meta["authorization_servers"] == [oidc_provider.issuer]
        assert meta["scopes_supported"] == ["mcp"]
        assert meta["bearer_methods_supported"] == ["header"]


async def test_mcp_challenges_point_to_the_metadata(idp_client, oidc_provider) -> None:
    base = str(idp_client.make_url("/")).rstrip("/")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    r = await idp_client.post("/mcp", json=body)
    assert r.status == 401
    challenge = r.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert 'scope="mcp"' in challenge
    r = await idp_client.post("/mcp", json=body, headers=bearer("not-a-token"))
    assert r.status == 401 and 'error="invalid_token"' in r.headers["WWW-Authenticate"]
    no_mcp = await oidc_provider.token("agent-es", scope="tool.math.invoke")
    r = await idp_client.post("/mcp", json=body, headers=bearer(no_mcp))
    assert r.status == 403
    challenge = r.headers["WWW-Authenticate"]
    assert 'error="insufficient_scope"' in challenge and 'scope="mcp"' in challenge
    assert (await r.json())["error"]["code"] == "insufficient_scope"


class Memory:
    """The SDK OAuth client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, info: Any) -> None:
        self.client = info


async def sdk_tools(url: str, storage: Memory) -> set[str]:
    """The tools the official SDK's OAuth client lists, knowing only `url` and its credentials."""
    from mcp.client import Client
    from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
    from mcp.client.streamable_http import streamable_http_client

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `issuer` omitted on purpose: discovered from the server
        auth = ClientCredentialsOAuthProvider(server_url=url, storage=storage,
                                              client_id="agent-es", client_secret="agent-es-secret")
    http = httpx2.AsyncClient(auth=auth, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as c:
        return {t.name for t in (await c.list_tools()).tools}


async def _provider_app(aiohttp_server: Callable[..., Any], settings: Settings,
                        oidc_provider: OidcProvider) -> tuple[str, Any]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    app = create_app(provider_settings(settings, oidc_provider, public_url=base, oidc_audience=None))
    await aiohttp_server(app, port=port)
    await app[appkeys.CATALOG].wait_available(list(BUILTIN_TOOLS), timeout=10)
    return base, app


async def test_the_mcp_sdk_oauth_client_connects_from_the_url_and_its_credentials(
        aiohttp_server: Callable[..., Any], settings: Settings, builtin: list[Any],
        oidc_provider: OidcProvider) -> None:
    base, _ = await _provider_app(aiohttp_server, settings, oidc_provider)
    storage = Memory()
    assert "math" in await sdk_tools(f"{base}/mcp", storage)
    assert storage.tokens is not None and "mcp" in (storage.tokens.scope or "").split()


async def test_the_mcp_sdk_oauth_client_reaches_a_tool_set_with_the_mcp_token(
        aiohttp_server: Callable[..., Any], settings: Settings, builtin: list[Any],
        oidc_provider: OidcProvider) -> None:
    # A set's endpoint is part of /mcp: its challenge names /mcp's metadata, and the token the
    # client gets for that resource (the default audiences: no setting per set) serves it.
    from proxy.core.toolsets import ToolSetRepository

    base, app = await _provider_app(aiohttp_server, settings, oidc_provider)
    name = f"oauth-{uuid.uuid4().hex[:8]}"
    await ToolSetRepository(app[appkeys.POOL]).put(team_id="t-provider", name=name,
                                                   tools=["math", "text"], description="", by="test")
    await app[appkeys.TOOLSETS].reload()
    storage = Memory()
    assert await sdk_tools(f"{base}/mcp/sets/{name}", storage) == {"math", "text"}
    assert storage.tokens is not None
