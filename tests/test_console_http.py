"""The console over plain HTTP: the session exchange, the refusals a browser attack would meet
(CSRF, Origin, Host, scope, rate guard), the live inbox stream, the policy view, the page's
own hardening. The browser tests (test_console_browser.py) drive the same through Chromium."""

from __future__ import annotations

import asyncio
import re
import time
from datetime import datetime
from importlib import resources
from typing import Any

import orjson
import pytest

from proxy.web import keys as appkeys
from proxy.web.app import create_app
from services.builtin import BUILTIN_TOOLS
from tests.support.calls import bearer, grant, invoke
from tests.support.console_helpers import host, login, origin

ORDER = {"op": "create_order", "product_id": "bread", "qty": 1}


async def hold_text(client: Any, gov: str, agent: str, team: str, text: str = "probe",
                    **extra: Any) -> dict[str, Any]:
    """A held call: the team's own rule asks an approval for each `text` call."""
    r = await client.post("/v1/admin/team-rules", headers=bearer(gov),
                          json={"team_id": team, "tool": "text", "require_approval": True})
    assert r.status == 201, await r.text()
    deadline = time.monotonic() + 5
    while True:  # the rule reaches the policy within a second
        status, body = await invoke(client, agent, "text", {"op": "upper", "text": text}, **extra)
        if status == 202:
            return body
        assert status == 200 and time.monotonic() < deadline, body
        await asyncio.sleep(0.05)


# --- the session ---------------------------------------------------------------------------

async def test_a_governance_token_is_exchanged_for_a_session_cookie(client, token, team) -> None:
    gov = token(agent="gov", team=team, role="governance", ttl=600)
    console = await login(client, gov)
    cookie = console.set_cookie
    assert cookie.startswith("toolproxy_console=")
    attrs = {a.strip().split("=")[0].lower() for a in cookie.split(";")[1:]}
    assert {"httponly", "path", "samesite", "max-age"} <= attrs
    assert "SameSite=Strict" in cookie and "Path=/" in cookie
    assert "secure" not in attrs  # plain http here; see the TLS case below
    assert gov not in cookie and gov not in orjson.dumps(console.body).decode()
    assert console.body["identity"] == {"agent_id": "gov", "team_id": team, "role": "governance"}
    # Bound to the token: it never outlives it.
    expires = datetime.fromisoformat(console.body["expires_at"]).timestamp()
    assert expires <= time.time() + 600 + 1
    # A reload reads it back (with the same CSRF token), from this Host only.
    status, again = await console.get("/console/session", csrf=False)
    assert status == 200 and again["csrf_token"] == console.csrf
    other_host = host(client).replace("127.0.0.1", "localhost")  # served too, but not its Host
    r = await client.get("/console/session", headers={"Cookie": console.cookie, "Host": other_host})
    assert r.status == 401
    r = await client.get("/console/session", headers={"Cookie": console.cookie, "Host": "evil.example:80"})
    assert r.status == 421  # the proxy's Host allowlist: not a Host this server serves
    r = await client.get("/console/session", headers={"Cookie": console.cookie, "Sec-Fetch-Site": "cross-site"})
    assert r.status == 403
    # The cookie's secret is stored only as a hash.
    pool = client.app[appkeys.POOL]
    secret = console.cookie.split("=", 1)[1]
    stored = await pool.fetch("SELECT session_hash, csrf_token FROM console_sessions WHERE team_id = $1", team)
    assert len(stored) == 1 and secret.encode() not in bytes(stored[0]["session_hash"])


async def test_over_tls_the_cookie_is_secure_and_host_prefixed(client, token, team) -> None:
    # Behind a proxy that terminates TLS, the page's Origin says https.
    gov = token(agent="gov", team=team, role="admin")
    r = await client.post("/console/session", json={"token": gov},
                          headers={"Origin": f"https://{host(client)}"})
    assert r.status == 201, await r.text()
    cookie = r.headers["Set-Cookie"]
    assert cookie.startswith("__Host-toolproxy_console=") and "Secure" in cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie


async def test_login_refuses_agents_bad_tokens_and_other_origins(client, token, team) -> None:
    async def attempt(tok: str, **headers: str) -> tuple[int, dict[str, Any]]:
        r = await client.post("/console/session", json={"token": tok}, headers=headers)
        return r.status, await r.json()

    own = {"Origin": origin(client)}
    status, body = await attempt(token(agent="a", team=team), **own)
    assert (status, body["error"]["code"]) == (403, "forbidden")  # agents never get a session
    status, body = await attempt("not-a-token", **own)
    assert (status, body["error"]["code"]) == (401, "unauthenticated")
    gov = token(agent="gov", team=team, role="governance")
    for headers in ({}, {"Origin": "http://evil.example"}, {"Origin": "null"},
                    {"Origin": f"http://{host(client)}.evil.example"},
                    {"Origin": origin(client), "Sec-Fetch-Site": "cross-site"}):
        status, body = await attempt(gov, **headers)
        assert (status, body["error"]["code"]) == (403, "origin_not_allowed"), headers
    r = await client.post("/console/session", data=b"token=x", headers={**own, "Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 415
    pool = client.app[appkeys.POOL]
    assert await pool.fetchval("SELECT count(*) FROM console_sessions WHERE team_id = $1", team) == 0


async def test_where_the_operator_lists_origins_the_console_keeps_to_them(aiohttp_client, settings,
                                                                        builtin, token, team) -> None:
    from infra.embedded.ports import free_port

    gov = token(agent="gov", team=team, role="governance")
    for listed, expected in (("https://gov.example", 403), ("https://gov.example,http://127.0.0.1:{port}", 201)):
        port = free_port()
        app = create_app(settings.model_copy(update={"allowed_origins": listed.format(port=port)}))
        client = await aiohttp_client(app, server_kwargs={"port": port})
        r = await client.post("/console/session", json={"token": gov}, headers={"Origin": origin(client)})
        assert r.status == expected, (listed, await r.text())
        if expected == 403:
            assert (await r.json())["error"]["code"] == "origin_not_allowed"


async def test_logout_ends_the_session(client, token, team) -> None:
    console = await login(client, token(agent="gov", team=team, role="governance"))
    status, _ = await console.get("/v1/approvals")
    assert status == 200
    r = await client.delete("/console/session", headers=console.headers())
    assert r.status == 200 and "Max-Age=0" in r.headers["Set-Cookie"]
    status, body = await console.get("/v1/approvals")
    assert (status, body["error"]["code"]) == (401, "unauthenticated")
    assert (await console.get("/console/session", csrf=False))[0] == 401


# --- what a cookie alone can do: nothing ----------------------------------------------------

@pytest.fixture
async def held_order(client, token, team) -> dict[str, Any]:
    await grant(client, token, team, "tool.greenfood.order.invoke")
    buyer = token(agent="buyer", team=team)
    deadline = time.monotonic() + 5
    while True:
        status, held = await invoke(client, buyer, "greenfood.order", ORDER)
        if status == 202:
            return held
        assert time.monotonic() < deadline, held
        await asyncio.sleep(0.05)


async def approval_state(client: Any, approval_id: str) -> str:
    return await client.app[appkeys.POOL].fetchval(
        "SELECT state FROM approvals WHERE approval_id = $1::uuid", approval_id)


async def test_a_mutation_needs_the_csrf_token(client, token, team, held_order) -> None:
    console = await login(client, token(agent="gov", team=team, role="governance"))
    path = f"/v1/approvals/{held_order['approval_id']}/decision"
    decision = {"decision": "approve", "reason": "ok"}
    status, body = await console.post(path, decision, csrf=False)
    assert (status, body["error"]["code"]) == (403, "csrf_failed")
    status, body = await console.post(path, decision, **{"X-CSRF-Token": "x" * 43}, csrf=False)
    assert (status, body["error"]["code"]) == (403, "csrf_failed")
    # Another session's token does not fit this one.
    other = await login(client, token(agent="gov2", team=team, role="governance"))
    status, body = await console.post(path, decision, csrf=False, **{"X-CSRF-Token": other.csrf})
    assert (status, body["error"]["code"]) == (403, "csrf_failed")
    # Reads need it too: the console's own requests all carry it.
    status, body = await console.get("/v1/approvals", csrf=False)
    assert (status, body["error"]["code"]) == (403, "csrf_failed")
    assert await approval_state(client, held_order["approval_id"]) == "pending"  # nothing moved
    status, body = await console.post(path, decision)
    assert status == 200, body
    assert body["approval"]["decided_by"] == f"governance:gov@{team}"
    assert await approval_state(client, held_order["approval_id"]) == "approved"


async def test_a_mutation_needs_this_consoles_origin_and_host(client, token, team, held_order) -> None:
    console = await login(client, token(agent="gov", team=team, role="governance"))
    path = f"/v1/approvals/{held_order['approval_id']}/decision"
    decision = {"decision": "deny", "reason": "no"}
    for extra in ({"with_origin": False}, {"Origin": "http://evil.example"}, {"Origin": "null"},
                  {"Origin": f"{origin(client)}/path"}, {"Sec-Fetch-Site": "same-site"}):
        status, body = await console.post(path, decision, **extra)
        assert (status, body["error"]["code"]) == (403, "origin_not_allowed"), extra
    # A DNS name rebound to this address is not a Host this proxy serves (its Host allowlist);
    # a Host it serves but the session was not opened on is refused by the session itself.
    status, body = await console.post(path, decision, Host="rebound.example:80",
                                      Origin="http://rebound.example:80")
    assert (status, body["error"]["code"]) == (421, "misdirected_request")
    other = host(client).replace("127.0.0.1", "localhost")
    status, body = await console.post(path, decision, Host=other, Origin=f"http://{other}")
    assert (status, body["error"]["code"]) == (401, "unauthenticated")
    # A GET carrying a foreign Origin is refused as well.
    status, body = await console.get("/v1/approvals", Origin="http://evil.example")
    assert (status, body["error"]["code"]) == (403, "origin_not_allowed")
    assert await approval_state(client, held_order["approval_id"]) == "pending"
    status, _ = await console.post(path, decision)
    assert status == 200
    assert await approval_state(client, held_order["approval_id"]) == "denied"


async def test_a_session_reaches_governance_routes_only(client, token, team) -> None:
    console = await login(client, token(agent="gov", team=team, role="admin"))
    for path, body in (("/v1/tools/invoke", {"tool": "math", "args": {"expr": "1+1"}}),
                       ("/v1/openai/tool_calls", {"tool_calls": []}),
                       ("/v1/runs", {})):
        status, answer = await console.post(path, body)
        assert (status, answer["error"]["code"]) == (401, "unauthenticated"), path
    # /mcp refuses this Origin by itself (403); without one, the session does not reach it.
    status, answer = await console.post("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                        with_origin=False)
    assert (status, answer["error"]["code"]) == (401, "unauthenticated")
    status, _ = await console.get("/v1/tools")
    assert status == 401


async def test_bearer_requests_never_read_the_cookie(client, token, team) -> None:
    console = await login(client, token(agent="gov", team=team, role="governance"))
    agent = token(agent="a", team=team)
    r = await client.get("/v1/approvals", headers={**console.headers(), **bearer(agent)})
    assert r.status == 403  # the agent's token decides: the governance cookie is not used
    r = await client.get("/v1/approvals", headers={**console.headers(), "Authorization": "Bearer junk"})
    assert r.status == 401


async def test_agents_never_reach_the_consoles_api(client, token, team) -> None:
    agent = token(agent="a", team=team)
    for path in ("/console/api/inbox/stream", "/console/api/policy", "/console/api/catalog"):
        r = await client.get(path, headers=bearer(agent))
        assert r.status == 403, path


async def test_the_rate_guard_holds_console_mutations_per_identity(aiohttp_client, settings, builtin,
                                                                   token, team) -> None:
    app = create_app(settings.model_copy(update={"console_mutations_per_minute": 2.0,
                                                 "console_mutations_burst": 3}))
    client = await aiohttp_client(app)
    console = await login(client, token(agent="gov", team=team, role="governance"))  # 1 of 3
    codes = []
    for i in range(3):
        status, body = await console.post("/v1/admin/team-rules",
                                          {"team_id": team, "tool": "math", "rate_per_minute": 100 + i})
        codes.append((status, body.get("error", {}).get("code")))
    assert codes[:2] == [(201, None), (201, None)] and codes[2] == (429, "rate_limited"), codes
    r = await client.post("/v1/admin/team-rules", json={"team_id": team, "tool": "math", "rate_per_minute": 9},
                          headers=console.headers())
    assert r.status == 429 and 1 <= int(r.headers["Retry-After"]) <= 31
    # Another identity has its own bucket; reads are not counted.
    assert (await console.get("/v1/admin/team-rules"))[0] == 200
    other = await login(client, token(agent="gov2", team=team, role="governance"))
    assert (await other.post("/v1/admin/team-rules", {"team_id": team, "tool": "math",
                                                      "rate_per_minute": 7}))[0] == 201


# --- the live inbox ------------------------------------------------------------------------

class Stream:
    """Reads the console's SSE inbox: events as (name, data)."""

    def __init__(self, response: Any) -> None:
        self.response = response
        self.buffer = b""

    async def next(self, timeout: float = 10.0) -> tuple[str, dict[str, Any]]:
        async def read() -> tuple[str, dict[str, Any]]:
            while b"\n\n" not in self.buffer:
                chunk = await self.response.content.readany()
                assert chunk, "the stream ended"
                self.buffer += chunk
            block, self.buffer = self.buffer.split(b"\n\n", 1)
            lines = dict(line.split(b": ", 1) for line in block.split(b"\n") if not line.startswith(b":"))
            if not lines:
                return await read()
            return lines[b"event"].decode(), orjson.loads(lines[b"data"])
        return await asyncio.wait_for(read(), timeout)


async def open_stream(client: Any, headers: dict[str, str], query: str = "") -> Stream:
    r = await client.get(f"/console/api/inbox/stream{query}", headers=headers)
    assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream"), await r.text()
    return Stream(r)


async def test_the_inbox_streams_holds_and_decisions_to_every_open_console(client, token, team) -> None:
    gov = token(agent="gov", team=team, role="governance")
    agent = token(agent="writer", team=team)
    console = await login(client, gov)
    mine = await open_stream(client, console.headers(with_origin=False))
    by_bearer = await open_stream(client, bearer(token(agent="gov2", team=team, role="governance")))
    admin = await open_stream(client, bearer(token(agent="root", team="ops", role="admin")))
    stranger = await open_stream(client, bearer(token(agent="g", team=f"{team}x", role="governance")))
    for s in (mine, by_bearer, stranger):
        name, data = await s.next()
        assert name == "snapshot" and data["approvals"] == []
    assert (await admin.next())[0] == "snapshot"
    held = await hold_text(client, gov, agent, team, text='{"json": "<b>as text</b>"}')
    for s in (mine, by_bearer):
        name, data = await s.next()
        assert name == "added", data
        item = data["approval"]
        assert item["approval_id"] == held["approval_id"] and item["call_id"] == held["call_id"]
        assert (item["tool"], item["category"], item["agent_id"]) == ("text", "A", "writer")
        assert item["args"] == {"op": "upper", "text": '{"json": "<b>as text</b>"}'}
        assert item["args_size"] > 0 and len(item["args_hash"]) == 64 and item["reasons"]
        assert datetime.fromisoformat(item["expires_at"]) > datetime.fromisoformat(data["now"])
    while True:  # the admin's inbox covers every team (other tests' holds included)
        name, data = await admin.next()
        if name == "added" and data["approval"]["approval_id"] == held["approval_id"]:
            break
    status, _ = await console.post(f"/v1/approvals/{held['approval_id']}/decision",
                                   {"decision": "approve", "reason": "fine"})
    assert status == 200
    for s in (mine, by_bearer):
        assert await s.next() == ("removed", {"approval_id": held["approval_id"]})
    # The other team's inbox never heard of it.
    with pytest.raises(asyncio.TimeoutError):
        await stranger.next(timeout=0.5)
    r = await client.post(f"/v1/calls/{held['call_id']}/resume", headers=bearer(agent))
    assert r.status == 200 and (await r.json())["output"]["text"] == '{"JSON": "<B>AS TEXT</B>"}'
    for s in (mine, by_bearer, admin, stranger):
        s.response.close()


async def test_a_confidential_call_shows_only_its_hash_and_size(client, token, team) -> None:
    gov = token(agent="gov", team=team, role="governance")
    held = await hold_text(client, gov, token(agent="w", team=team), team, text="secret words",
                           context={"team_id": team, "confidential": True})
    stream = await open_stream(client, bearer(gov))
    name, data = await stream.next()
    (item,) = [a for a in data["approvals"] if a["approval_id"] == held["approval_id"]]
    assert item["confidential"] is True and item["args"] is None and item["args_omitted"] == "confidential"
    assert len(item["args_hash"]) == 64 and item["args_size"] > 0
    assert b"secret words" not in orjson.dumps(data)
    stream.response.close()


async def test_an_expired_approval_leaves_the_inbox_at_its_deadline(aiohttp_client, settings, builtin,
                                                                    token, team) -> None:
    app = create_app(settings.model_copy(update={"approval_ttl_s": 2}))
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(list(BUILTIN_TOOLS), timeout=10)
    gov = token(agent="gov", team=team, role="governance")
    stream = await open_stream(client, bearer(gov))
    assert (await stream.next())[0] == "snapshot"
    held = await hold_text(client, gov, token(agent="w", team=team), team)
    name, data = await stream.next()
    assert name == "added" and data["approval"]["approval_id"] == held["approval_id"]
    deadline = datetime.fromisoformat(data["approval"]["expires_at"]).timestamp()
    name, data = await stream.next(timeout=5)
    assert (name, data) == ("removed", {"approval_id": held["approval_id"]})
    assert time.time() - deadline < 1.0  # at its deadline, not at the next sweep (15 s)
    stream.response.close()


# --- the other pages' data -----------------------------------------------------------------

async def test_the_decision_log_keeps_the_policys_whole_output(client, token, team) -> None:
    gov = token(agent="gov", team=team, role="governance")
    status, _ = await invoke(client, token(agent="a", team=team), "math", {"expr": "1+2"})
    assert status == 200
    console = await login(client, gov)
    deadline = time.monotonic() + 10
    while True:
        status, body = await console.get("/v1/admin/decisions?phase=call&tool=math")
        assert status == 200
        if body["decisions"]:
            break
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    d = body["decisions"][0]
    assert d["input"]["args"] == {"expr": "1+2"} and d["input"]["subject"]["team_id"] == team
    assert d["output"]["allow"] is True and d["output"]["require_approval"] is False
    assert d["output"]["obligations"]["timeout_ms"] > 0 and d["output"]["error_code"] is None
    assert d["policy_revision"]


async def test_the_policy_view_shows_the_serving_revision_and_its_tests(aiohttp_client, isolated_settings,
                                                                        builtin, token, team) -> None:
    from pdp.policy_set import load_policy_dir

    app = create_app(isolated_settings)
    client = await aiohttp_client(app)
    gov = await login(client, token(agent="gov", team=team, role="governance"))
    status, view = await gov.get("/console/api/policy")
    assert status == 200, view
    shipped = load_policy_dir()
    assert view["serving"] == {"revision": shipped.revision, "engine": "embedded", "source": "directory"}
    assert view["modules"] == shipped.modules
    assert view["tests"]["failed"] == 0 and view["tests"]["passed"] >= 10
    assert view["tests"]["tests"] == sorted(shipped.tests)
    # Governance reads; only admins push.
    status, body = await gov.post("/v1/admin/policies", {"modules": {**shipped.modules, **shipped.tests}})
    assert (status, body["error"]["code"]) == (403, "forbidden")
    admin = await login(client, token(agent="root", team="ops", role="admin"))
    extra = "package toolproxy.console_probe\nimport rego.v1\ntest_probe if { true }\n"
    status, body = await admin.post("/v1/admin/policies",
                                    {"modules": {**shipped.modules, **shipped.tests, "probe_test.rego": extra}})
    assert status == 201, body
    deadline = time.monotonic() + 5
    while app[appkeys.PDP].revision != body["revision"]:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    status, view = await gov.get("/console/api/policy")
    assert view["serving"]["source"] == "pushed" and view["serving"]["revision"] == body["revision"]
    assert "probe_test.rego" in view["tests"]["tests"] and view["tests"]["failed"] == 0
    assert {"package": "toolproxy.console_probe", "name": "test_probe", "passed": True,
            "error": None} in view["tests"]["results"]
    assert view["revisions"][0]["revision"] == body["revision"] and view["revisions"][0]["active"]


# --- the page itself -----------------------------------------------------------------------

STATIC = resources.files("proxy.web.console") / "static"


async def test_the_page_is_served_with_a_strict_content_security_policy(client) -> None:
    r = await client.get("/console")
    assert r.status == 200 and r.content_type == "text/html"
    csp = r.headers["Content-Security-Policy"]
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "script-src 'self'" in csp and "style-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert r.headers["X-Frame-Options"] == "DENY" and r.headers["X-Content-Type-Options"] == "nosniff"
    r2 = await client.get("/console", headers={"If-None-Match": r.headers["ETag"]})
    assert r2.status == 304
    for name in ("console.js", "inbox.js", "console.css"):
        r = await client.get(f"/console/static/{name}")
        assert r.status == 200 and "unsafe-inline" not in r.headers["Content-Security-Policy"]
    for bad in ("../app.py", "index.html", "nope.js", "%2e%2e%2fapp.py", "..%2fapp.py"):
        r = await client.get(f"/console/static/{bad}")
        assert r.status in (401, 404) and b"import" not in await r.read(), bad


def test_no_inline_code_and_no_html_sinks_in_the_shipped_files() -> None:
    html = (STATIC / "index.html").read_text()
    assert "<style" not in html and " style=" not in html
    assert re.findall(r"<script\b[^>]*>", html) == ['<script type="module" src="/console/static/console.js">']
    assert not re.search(r"\son[a-z]+=", html)  # no inline event handlers
    names = [e.name for e in STATIC.iterdir() if e.name.endswith(".js")]
    assert len(names) >= 8
    for name in names:
        source = (STATIC / name).read_text().replace('"http://www.w3.org/2000/svg"', "")
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                     "new Function", "setAttribute(\"on", "setAttribute('on", "http://", "https://"):
            assert sink not in source, (name, sink)


async def test_the_console_fails_closed_when_postgres_is_away(database_url) -> None:
    from proxy.web.console.guard import RateGuard
    from proxy.web.console.session import SessionStore
    from infra.db import create_pool
    from proxy.errors import DependencyUnavailable
    from proxy.core.limits.gcra import Rate

    pool = await create_pool(database_url, min_size=1, max_size=1)
    sessions, guard = SessionStore(pool), RateGuard(pool, Rate(per_minute=60, burst=5))
    assert await sessions.get("a" * 43) is None  # up: no such session
    await pool.close()
    with pytest.raises(DependencyUnavailable):  # away: refused (503), never "no session"
        await sessions.get("a" * 43)
    with pytest.raises(DependencyUnavailable):
        await guard.take("governance:g@t")


async def test_a_prepared_calls_preview_is_in_the_inbox(chain_client, chain, token) -> None:
    # The chain tools are prepared before they are held: the reviewer sees the transaction.
    from tests.support.chain_wallet import agent_of, recipient

    team = chain.team()
    payer = await agent_of(chain_client, token, team, "chain.transfer")
    gov = token(agent="gov", team=team, role="governance")
    stream = await open_stream(chain_client, bearer(gov))
    assert (await stream.next())[0] == "snapshot"
    to = recipient()
    status, held = await invoke(chain_client, payer, "chain.transfer", {"to": to.lower(), "value_wei": 777})
    assert status == 202, held
    name, data = await stream.next()
    assert name == "added" and data["approval"]["approval_id"] == held["approval_id"]
    preview = data["approval"]["preview"]
    assert preview["kind"] == "evm_transaction"
    assert preview["transaction"]["to"] == to and preview["transaction"]["value_wei"] == 777
    stream.response.close()
