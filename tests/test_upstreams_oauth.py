"""An upstream behind OAuth client credentials: the bridge gets its token from a real
authorization server (`oidc-provider`, npm), caches it across calls, fetches a new one once on
a 401, and forwards nothing without one; the upstream (the `mcp` SDK's server) checks each
token against the provider's JWKS."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cli.upstreams import _oauth
from services.netguard.fetch import Fetcher
from services.netguard.guard import Guard
from services.netguard.resolver import SystemResolver
from services.upstreams.config import UpstreamSettings
from services.upstreams.addresses import admission
from services.upstreams.errors import GrantRefused
from services.upstreams.oauth import OAuthConfig, TokenSource
from tests.support.calls import invoke
from tests.support.oidc_provider import OidcProvider
from tests.support.openapi_servers import serve_petstore
from tests.support.upstream_servers import BearerCheck, demo_server, free_port, serve_asgi
from tests.support.upstream_fixtures import bridge, settings  # noqa: F401  (fixtures)
from tests.support.upstreams import classified, get, post, unique, upstream_settings

AUDIENCE = "https://upstream.test"
CLIENT = "upstream-bridge"


@pytest.fixture
def up_settings(tmp_path: Path) -> UpstreamSettings:
    return upstream_settings(tmp_path)


@pytest.fixture
async def guarded(oidc_provider: OidcProvider) -> AsyncIterator[tuple[str, BearerCheck]]:
    """The SDK's demo server behind a bearer check against the provider's keys."""
    async with aiohttp.ClientSession() as s, s.get(f"{oidc_provider.issuer}/jwks") as r:
        jwks = await r.json()
    check = BearerCheck(demo_server().streamable_http_app(host="127.0.0.1"), jwks,
                        oidc_provider.issuer, AUDIENCE)
    async with serve_asgi(check) as base:
        yield f"{base}/mcp", check


def oauth(provider: OidcProvider, secret: str = f"{CLIENT}-secret", **more: Any) -> dict[str, Any]:
    return {"token_url": f"{provider.issuer}/token", "client_id": CLIENT, "client_secret": secret,
            "scope": "mcp", "resource": AUDIENCE, **more}


async def test_calls_carry_the_providers_token_cached_and_renewed_once_on_401(  # type: ignore[no-untyped-def]
        client, token, team, bridge, guarded, oidc_provider: OidcProvider) -> None:
    url, check = guarded
    admin, agent = token(agent="root", team="ops", role="admin"), token(team=team)
    name = unique("oauthed")
    before = await oidc_provider.grants(CLIENT)
    status, body = await post(client, admin, "/v1/admin/upstreams",
                              {"name": name, "transport": "streamable_http", "url": url,
                               "oauth": oauth(oidc_provider)})
    assert status == 201, body
    assert body["upstream"]["credentials"] == "oauth_client_credentials"
    assert body["upstream"]["secret_header"] is None
    assert body["upstream"]["oauth"] == {"token_url": f"{oidc_provider.issuer}/token",
                                         "client_id": CLIENT, "scope": "mcp", "audience": None,
                                         "resource": AUDIENCE}
    r = await client.get(f"/v1/admin/upstreams/{name}", headers={"Authorization": f"Bearer {admin}"})
    shown = await r.text()
    assert f"{CLIENT}-secret" not in shown and f"{CLIENT}-secret" not in body.__repr__()

    status, body = await post(client, admin, f"/v1/admin/upstreams/{name}/sync")
    assert status == 200, body
    assert "add" in {t["tool"] for t in body["tools"]}
    await classified(client, admin, name, "add")
    for a in range(3):
        status, body = await invoke(client, agent, f"{name}.add", {"a": a, "b": 1})
        assert status == 200 and body["output"] == {"sum": a + 1}, body
    # One token, fetched once and carried by every request (calls, lists, pings).
    assert await oidc_provider.grants(CLIENT) == before + 1
    assert len(set(check.accepted)) == 1 and check.refused == 0
    assert agent not in check.accepted

    # The upstream refuses the token (revoked): one new token, the call retried once and served.
    check.refuse_next = True
    status, body = await invoke(client, agent, f"{name}.add", {"a": 5, "b": 5})
    assert status == 200 and body["output"] == {"sum": 10}, body
    assert check.refused == 1 and len(set(check.accepted)) == 2
    assert await oidc_provider.grants(CLIENT) == before + 2


async def test_a_refused_grant_or_a_dead_authorization_server_forwards_nothing(  # type: ignore[no-untyped-def]
        client, token, bridge, guarded, oidc_provider: OidcProvider) -> None:
    url, check = guarded
    admin = token(agent="root", team="ops", role="admin")
    bad = unique("badsecret")
    status, body = await post(client, admin, "/v1/admin/upstreams",
                              {"name": bad, "transport": "streamable_http", "url": url,
                               "oauth": oauth(oidc_provider, secret="wrong")})
    assert status == 201, body
    status, body = await post(client, admin, f"/v1/admin/upstreams/{bad}/sync")
    assert status == 424 and body["error"]["code"] == "upstream_error", body
    assert "invalid_client" in body["error"]["message"] and "wrong" not in body["error"]["message"]

    down = unique("asdown")
    status, body = await post(client, admin, "/v1/admin/upstreams",
                              {"name": down, "transport": "streamable_http", "url": url,
                               "oauth": {**oauth(oidc_provider),
                                         "token_url": f"http://127.0.0.1:{free_port()}/token"}})
    assert status == 201, body
    status, body = await post(client, admin, f"/v1/admin/upstreams/{down}/sync")
    assert status == 424 and body["error"]["code"] == "upstream_unavailable", body
    # Without a token nothing reached the upstream at all.
    assert check.accepted == [] and check.refused == 0


async def test_the_authorization_server_failing_mid_session(  # type: ignore[no-untyped-def]
        client, token, team, bridge, guarded, oidc_provider: OidcProvider) -> None:
    """A 401 while the authorization server answers 503: the call ends upstream_unavailable."""
    from aiohttp import web

    url, check = guarded
    admin, agent = token(agent="root", team="ops", role="admin"), token(team=team)
    state = {"down": False}

    async def relay(request: web.Request) -> web.Response:  # the provider's token endpoint, or 503
        if state["down"]:
            return web.json_response({"error": "temporarily_unavailable"}, status=503)
        async with aiohttp.ClientSession() as s, s.post(
                f"{oidc_provider.issuer}/token", data=await request.read(),
                headers={k: v for k, v in request.headers.items()
                         if k.lower() in ("authorization", "content-type")}) as r:
            return web.Response(body=await r.read(), status=r.status, content_type="application/json")

    app = web.Application()
    app.router.add_post("/token", relay)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        name = unique("midway")
        token_url = f"http://127.0.0.1:{runner.addresses[0][1]}/token"
        status, body = await post(client, admin, "/v1/admin/upstreams",
                                  {"name": name, "transport": "streamable_http", "url": url,
                                   "oauth": oauth(oidc_provider, token_url=token_url)})
        assert status == 201, body
        assert (await post(client, admin, f"/v1/admin/upstreams/{name}/sync"))[0] == 200
        await classified(client, admin, name, "add")
        status, body = await invoke(client, agent, f"{name}.add", {"a": 1, "b": 1})
        assert status == 200, body
        served = len(check.accepted)
        state["down"], check.refuse_next = True, True
        status, body = await invoke(client, agent, f"{name}.add", {"a": 2, "b": 2})
        assert body["error"]["code"] == "upstream_unavailable", (status, body)
        assert len(check.accepted) == served  # refused once, never served without a token
    finally:
        await runner.cleanup()


async def test_an_openapi_service_behind_client_credentials(  # type: ignore[no-untyped-def]
        client, token, team, bridge, oidc_provider: OidcProvider) -> None:
    import jwt

    admin, agent = token(agent="root", team="ops", role="admin"), token(team=team)
    async with serve_petstore() as pets:
        name = unique("oapets")
        status, body = await post(client, admin, "/v1/admin/openapi", {
            "name": name, "document": pets.document, "base_url": pets.base_url,
            "oauth": oauth(oidc_provider)})
        assert status == 201, body
        assert body["upstream"]["credentials"] == "oauth_client_credentials"
        assert body["upstream"]["oauth"]["client_id"] == CLIENT
        status, listed = await get(client, admin, "/v1/admin/upstreams")
        assert f"{CLIENT}-secret" not in str(listed)
        status, body = await post(client, admin, f"/v1/admin/upstreams/{name}/sync")
        assert status == 200, body
        await classified(client, admin, name, "listPets")
        before = await oidc_provider.grants(CLIENT)
        for _ in range(2):
            status, body = await invoke(client, agent, f"{name}.list_pets", {"limit": 1})
            assert status == 200 and body["output"]["status"] == 200, body
        sent = [r["headers"]["Authorization"] for r in pets.seen]
        assert len(sent) == 2 and sent[0] == sent[1] and sent[0].startswith("Bearer ")
        claims = jwt.decode(sent[0][7:], options={"verify_signature": False})
        assert claims["aud"] == AUDIENCE and claims["client_id"] == CLIENT
        assert await oidc_provider.grants(CLIENT) == before + 1
        # The service refuses every token: one new token, one retry, then upstream_error.
        pets.answer_status = 401
        status, body = await invoke(client, agent, f"{name}.list_pets", {"limit": 1})
        assert body["error"]["code"] == "upstream_error", body
        assert len(pets.seen) == 4 and pets.seen[3]["headers"]["Authorization"] != sent[0]
        assert await oidc_provider.grants(CLIENT) == before + 2


async def test_oauth_registrations_refused(client, token, oidc_provider: OidcProvider) -> None:  # type: ignore[no-untyped-def]
    admin = token(agent="root", team="ops", role="admin")
    base = {"name": unique("refused"), "transport": "streamable_http", "url": "http://127.0.0.1:9/mcp"}
    cases = [
        ({"oauth": oauth(oidc_provider, token_url="http://10.1.2.3/token")}, "url_not_allowed"),
        ({"oauth": oauth(oidc_provider, token_url="http://169.254.169.254/token")}, "url_not_allowed"),
        ({"oauth": oauth(oidc_provider), "secret_header": "X-Key", "secret": "s"}, None),
        ({"oauth": {**oauth(oidc_provider), "extra": 1}}, None),
        ({"oauth": oauth(oidc_provider, scope="bad\"scope")}, None),
        ({"oauth": {k: v for k, v in oauth(oidc_provider).items() if k != "client_secret"}}, None),
    ]
    for extra, code in cases:
        status, body = await post(client, admin, "/v1/admin/upstreams", {**base, **extra})
        assert status == 400, (extra, body)
        if code:
            assert body["error"]["code"] == code, body
        assert f"{CLIENT}-secret" not in str(body)  # never echoed
    status, body = await get(client, admin, "/v1/admin/upstreams")
    assert base["name"] not in {u["name"] for u in body["upstreams"]}


async def test_the_token_is_kept_until_shortly_before_it_expires(oidc_provider: OidcProvider) -> None:
    now = [1000.0]
    fetcher = Fetcher(Guard(SystemResolver()), user_agent="test")
    cfg = OAuthConfig(token_url=f"{oidc_provider.issuer}/token", client_id=CLIENT,
                      client_secret=f"{CLIENT}-secret", scope="mcp", resource=AUDIENCE)
    source = TokenSource("x", cfg, fetcher, lambda u: admission(u, upstream_settings_hosts()),
                         clock=lambda: now[0])
    try:
        first = await source.token()
        now[0] += 530  # the provider's tokens live 600 s: kept until 60 s before
        assert await source.token() == first and source.fetched == 1
        now[0] += 15
        second = await source.token()
        assert second != first and source.fetched == 2
        assert await source.token(stale=first) == second  # a 401 on the old token: no new fetch
        bad = TokenSource("x", dataclasses.replace(cfg, client_secret="nope"), fetcher,
                          lambda u: admission(u, upstream_settings_hosts()))
        with pytest.raises(GrantRefused):
            await bad.token()
    finally:
        await fetcher.close()


def upstream_settings_hosts() -> list[Any]:
    from services.netguard.hosts import parse_patterns

    return parse_patterns(["127.0.0.1:*"])


def test_the_cli_reads_the_client_secret_from_the_named_variable(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("UP_SECRET", "s3cret")
    a = argparse.Namespace(oauth_token_url="https://as.example/token", oauth_client_id="c",
                           oauth_client_secret_env="UP_SECRET", oauth_scope="read",
                           oauth_audience=None, oauth_resource=None)
    assert _oauth(a) == {"token_url": "https://as.example/token", "client_id": "c",
                         "client_secret": "s3cret", "scope": "read"}
