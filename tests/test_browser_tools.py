"""browser.lite and browser.full through the whole pipeline, against the local site."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from jsonschema import Draft202012Validator

from services.browser import service as browser
from services.browser.manifests import FULL as FULL_MANIFEST
from services.browser.manifests import LITE as LITE_MANIFEST
from services.sdk import CallContext
from tests.support.calls import bearer, grant, invoke
from tests.support.network_flow import (
    approve_and_resume,
    approved_call,
    canary_listener,
    lift_rate,
    roomy,
    set_egress,
    tool_code,
)
from tests.support.tool_harness import run_tool
from tests.support.web_site import Site


@pytest.fixture
async def canary() -> AsyncIterator[tuple[int, list[int]]]:
    async with canary_listener() as port_and_count:
        yield port_and_count


@pytest.fixture
def settings(settings):
    return roomy(settings)


@pytest.fixture
async def reader(client, token, team) -> str:
    await grant(client, token, team, "tool.browser.lite.invoke")
    await lift_rate(client, token, team, "reader", "browser.lite")
    await asyncio.sleep(0.2)
    return token(agent="reader", team=team)


@pytest.fixture
async def surfer(client, token, team) -> str:
    await grant(client, token, team, "tool.browser.full.invoke")
    await lift_rate(client, token, team, "surfer", "browser.full")
    await asyncio.sleep(0.2)
    return token(agent="surfer", team=team)


def ctx(team: str = "t_unit") -> CallContext:
    return CallContext(call_id=str(uuid.uuid4()), decision_id=str(uuid.uuid4()), team_id=team,
                       agent_id="a", run_id=None, deadline=time.time() + 5)


# ------------------------------------------------------------------ browser.lite


async def test_browser_lite_reads_title_text_and_links(client, reader, web_site: Site) -> None:
    url = web_site.url("/page", host="site.test")
    status, body = await invoke(client, reader, "browser.lite", {"url": url})
    assert status == 200, body
    out = body["output"]
    assert (out["url"], out["status"], out["title"], out["truncated"]) == (url, 200, "Local test page", False)
    assert out["text"].splitlines() == ["Hello", "First bold paragraph.", "plain text elsewhere js anchor", "Last", "line"]
    assert "never" not in out["text"] and "color" not in out["text"] and "no script" not in out["text"]
    assert out["links"] == [
        {"url": web_site.url("/plain", host="site.test"), "text": "plain text"},
        {"url": "https://example.org/x", "text": "elsewhere"},
    ]
    Draft202012Validator(LITE_MANIFEST.output_schema).validate(out)

    status, body = await invoke(client, reader, "browser.lite", {"url": web_site.url("/plain")})
    assert status == 200 and body["output"]["text"] == "just text\nline two"
    assert body["output"]["title"] == "" and body["output"]["links"] == []
    status, body = await invoke(client, reader, "browser.lite", {"url": web_site.url("/big"), "max_bytes": 1000})
    assert status == 200 and body["output"]["truncated"] is True
    assert body["output"]["title"] == "big" and len(body["output"]["text"]) < 1000


async def test_browser_lite_refuses_ssrf_before_any_connection(client, reader, web_site: Site, canary) -> None:
    port, accepted = canary
    attempts = [
        f"http://127.0.0.1:{port}/",  # loopback, not on the allowlist (only the site's port is)
        f"http://0x7f.1:{port}/", f"http://2130706433:{port}/", f"http://017700000001:{port}/",
        f"http://127.1:{port}/", f"http://[::1]:{port}/", f"http://[::ffff:127.0.0.1]:{port}/",
        f"http://private.test:{port}/",  # a name resolving to a private address
        f"http://site.test:{port}/",  # an allowlisted name, another port
        web_site.url(f"/redirect?to=http://127.0.0.1:{port}/"),  # a redirect to loopback
        web_site.url("/redirect?to=http://169.254.169.254/latest/meta-data/"),
        f"http://reader@site.test:{web_site.port}/page", "file:///etc/passwd",
        "http://169.254.169.254/latest/meta-data/",
    ]
    for url in attempts:
        status, body = await invoke(client, reader, "browser.lite", {"url": url})
        assert status == 200 and tool_code(body) == "url_not_allowed", (url, body)
    assert accepted == []


async def test_browser_lite_bad_input_and_other_codes(client, reader, token, team, web_site: Site) -> None:
    for args in ({}, {"url": ""}, {"url": "x" * 2049}, {"url": web_site.url("/page"), "max_bytes": 0},
                 {"url": web_site.url("/page"), "max_bytes": 1_000_001}, {"url": web_site.url("/page"), "x": 1},
                 {"url": 5}):
        status, body = await invoke(client, reader, "browser.lite", args)
        assert (status, body["error"]["code"]) == (400, "invalid_args"), args
    # A NUL never reaches the service: the proxy refuses the request (strict inputs).
    status, body = await invoke(client, reader, "browser.lite", {"url": "http://a\u0000b/"})
    assert (status, body["error"]["code"]) == (400, "invalid_request"), body
    status, body = await invoke(client, reader, "browser.lite", {"url": "http://a b/"})
    assert status == 200 and tool_code(body) == "invalid_url"
    for path, code in (("/binary", "unsupported_content_type"), ("/chain/5", "too_many_redirects")):
        status, body = await invoke(client, reader, "browser.lite", {"url": web_site.url(path)})
        assert status == 200 and tool_code(body) == code, body
    # No grant, no call: B tools need one.
    status, body = await invoke(client, token(agent="nobody", team=team + "x"), "browser.lite",
                                {"url": web_site.url("/page")})
    assert status == 403 and "grant_required" in body["error"]["reasons"]


async def test_browser_lite_allowlist_comes_from_the_operator(web_site: Site, db_pool) -> None:
    """Nothing is reachable without TOOLPROXY_BROWSER_LITE_HOSTS; a listed host is."""
    options = web_site.options()
    bare = type(options)(settings=options.settings.model_copy(update={"browser_lite_hosts": ""}),
                         resolver=web_site.resolver)
    svc = browser.service(db_pool, bare)
    try:
        reply = await run_tool(svc.tools[0], {"url": web_site.url("/page")}, ctx())
        assert reply["error"]["code"] == "url_not_allowed"
    finally:
        for close in svc.on_stop:
            await close()


# ------------------------------------------------------------------ browser.full


async def test_browser_full_is_held_approved_resumed_and_fetched_once(client, surfer, token, team, web_site: Site) -> None:
    gov = token(agent="gov", team=team, role="governance")
    assert (await set_egress(client, gov, team, [f"public.test:{web_site.port}"]))[0] == 200
    tag = uuid.uuid4().hex
    url = web_site.url(f"/counted?tag={tag}", host="public.test")
    key = f"/counted?tag={tag}"
    status, held = await invoke(client, surfer, "browser.full", {"url": url})
    assert status == 202 and held["status"] == "AUTHORIZATION_REQUIRED"
    await asyncio.sleep(0.1)
    assert web_site.hits[key] == 0  # nothing fetched while waiting

    status, done = await approve_and_resume(client, surfer, gov, held)
    assert status == 200 and done["status"] == "COMPLETED", done
    assert done["output"]["title"] == "counted" and done["output"]["text"] == tag
    assert web_site.hits[key] == 1
    r = await client.post(f"/v1/calls/{held['call_id']}/resume", headers=bearer(surfer))
    assert r.status == 200 and await r.json() == done
    assert web_site.hits[key] == 1  # a second resume replays, fetches nothing


async def test_browser_full_stays_within_the_team_egress(client, surfer, token, team, web_site: Site, canary) -> None:
    port, accepted = canary
    gov = token(agent="gov", team=team, role="governance")
    page = web_site.url("/page", host="public.test")

    status, body = await approved_call(client, surfer, gov, "browser.full", {"url": page})
    assert tool_code(body) == "url_not_allowed" and "no egress allowlist" in body["error"]["message"]

    hosts = [f"public.test:{web_site.port}", f"private.test:{port}", f"mixed.test:{port}", f"meta.test:{port}",
             f"site.test:{port}"]
    assert (await set_egress(client, gov, team, hosts))[0] == 200
    status, body = await approved_call(client, surfer, gov, "browser.full", {"url": page})
    assert body["status"] == "COMPLETED", body
    # Public names that resolve to private, metadata or mixed addresses: refused, allowlisted or not.
    for host in ("private.test", "mixed.test", "meta.test"):
        status, body = await approved_call(client, surfer, gov, "browser.full", {"url": f"http://{host}:{port}/"})
        assert tool_code(body) == "url_not_allowed", (host, body)
    for url in (f"http://other.test:{port}/", f"http://127.0.0.1:{port}/", f"http://0x7f.1:{port}/",
                web_site.url(f"/redirect?to=http://other.test:{port}/", host="public.test")):
        status, body = await approved_call(client, surfer, gov, "browser.full", {"url": url})
        assert tool_code(body) == "url_not_allowed", (url, body)
    assert accepted == []

    # A change reaches the service for the very next call.
    assert (await set_egress(client, gov, team, ["example.com"]))[0] == 200
    status, body = await approved_call(client, surfer, gov, "browser.full", {"url": page})
    assert tool_code(body) == "url_not_allowed"


async def test_browser_full_without_the_test_escape_reaches_no_loopback(web_site: Site, db_pool) -> None:
    """The same service built as in production (no escape): the local site is out of reach
    even when the team's allowlist names it."""
    team = f"t_{uuid.uuid4().hex[:10]}"
    await db_pool.execute("INSERT INTO egress_allowlists (team_id, hosts, updated_by) VALUES ($1, $2, 'test')",
                          team, [f"public.test:{web_site.port}"])
    svc = browser.service(db_pool, web_site.options(loopback_escape=False))
    full = [t for t in svc.tools if t.manifest.tool_id == "browser.full"][0]
    try:
        reply = await run_tool(full, {"url": web_site.url("/page", host="public.test")}, ctx(team))
        assert reply["error"]["code"] == "url_not_allowed" and "loopback" in reply["error"]["message"]
        escaped = browser.service(db_pool, web_site.options())
        full_escaped = [t for t in escaped.tools if t.manifest.tool_id == "browser.full"][0]
        assert (await run_tool(full_escaped, {"url": web_site.url("/page", host="public.test")}, ctx(team)))["ok"]
        for close in escaped.on_stop:
            await close()
    finally:
        for close in svc.on_stop:
            await close()


async def test_egress_routes(client, token, team) -> None:
    gov = token(agent="gov", team=team, role="governance")
    admin = token(agent="root", team="ops", role="admin")
    agent = token(agent="a1", team=team)
    assert (await set_egress(client, agent, team, ["example.com"]))[0] == 403
    assert (await set_egress(client, token(agent="g2", team="other", role="governance"), team, ["x.com"]))[0] == 403
    status, body = await set_egress(client, gov, team, ["Example.COM", "*.docs.example.org", "api.example.net:8443",
                                                        "example.com", "93.184.216.34"])
    assert status == 200, body
    assert body["egress"]["hosts"] == ["example.com", "*.docs.example.org", "api.example.net:8443", "93.184.216.34"]
    for bad in (["127.0.0.1"], ["[::1]"], ["10.0.0.1:80"], ["169.254.169.254"], ["*"], ["http://x.com"],
                ["x.com/path"], ["*.com"]):
        status, body = await set_egress(client, gov, team, bad)
        assert (status, body["error"]["code"]) == (400, "invalid_host_pattern"), (bad, body)
    for extra in ({"allow_loopback": True}, {"hosts": ["x.com"] * 201}, {"hosts": ["a\u0000b.com"]}):
        r = await client.post("/v1/admin/egress", json={"team_id": team, "hosts": ["x.com"], **extra},
                              headers=bearer(gov))
        assert r.status == 400 and (await r.json())["error"]["code"] == "invalid_request"
    r = await client.get("/v1/admin/egress", headers=bearer(gov))
    assert r.status == 200 and [e["team_id"] for e in (await r.json())["egress"]] == [team]
    r = await client.get("/v1/admin/egress", params={"team_id": "other"}, headers=bearer(gov))
    assert r.status == 403
    r = await client.get("/v1/admin/egress", params={"team_id": team}, headers=bearer(admin))
    assert (await r.json())["egress"][0]["updated_by"] == f"governance:gov@{team}"
    assert (await client.get("/v1/admin/egress", headers=bearer(agent))).status == 403
    assert (await set_egress(client, gov, team, []))[1]["egress"]["hosts"] == []


async def test_catalog_entries_are_complete(client, token, team) -> None:
    for name in ("browser.lite", "browser.full", "external_api.call"):
        await grant(client, token, team, f"tool.{name}.invoke")
    await asyncio.sleep(0.2)
    r = await client.get("/v1/tools", headers=bearer(token(agent="lister", team=team)))
    tools = {t["tool_id"]: t for t in (await r.json())["tools"]}
    expected = {"browser.lite": ("B", "read", False), "browser.full": ("D", "read", True),
                "external_api.call": ("D", "write", True)}
    for name, (category, action, approval) in expected.items():
        entry = tools[name]
        assert (entry["category"], entry["action"], entry["requires_approval"]) == (category, action, approval)
        assert entry["network"] is True and entry["available"] is True and entry["description"]
        assert entry["cost"]["per_call"] > 0 and entry["timeout_ms"] > 0 and entry["risk"]
        assert entry["input_schema"]["additionalProperties"] is False
    assert FULL_MANIFEST.input_schema == LITE_MANIFEST.input_schema
