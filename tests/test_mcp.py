"""The MCP surface through the official SDK's client (streamable HTTP, both protocol eras, and
stdio through `toolproxy mcp-stdio`), plus the transport rules a client library hides."""

from __future__ import annotations

import asyncio
import itertools
import re
from typing import Any

import httpx2
import orjson
import pytest
from mcp.shared.exceptions import MCPError

from proxy.core.notices import RESUME_TOOL
from proxy.web.mcp.protocol import MAX_BATCH
from wire.portable_schema import is_portable, published
from tests.support.calls import bearer, grant
from tests.support.settings import TEST_SECRET
from tests.support.infra import ProxyProcess
from tests.support.mcp_client import (
    ACCEPT,
    LEGACY,
    MODERN,
    base_url,
    init_body,
    mcp_http,
    mcp_stdio,
    mcp_url,
    raw,
    session_of,
)


# --- the SDK client, both eras ---------------------------------------------------------------


@pytest.mark.parametrize("mode, version", [("legacy", LEGACY), ("auto", MODERN)])
async def test_tools_list_is_the_callable_catalog_with_hints(client, token, team, mode, version) -> None:
    await grant(client, token, team, "tool.task.create.invoke")
    await asyncio.sleep(0.2)
    tok = token(team=team)
    r = await client.get("/v1/tools", headers=bearer(tok))
    native = {t["tool_id"]: t for t in (await r.json())["tools"]}
    async with mcp_http(mcp_url(client), tok, mode) as c:
        assert c.session.protocol_version == version
        tools = (await c.list_tools()).tools
    # Listed under names every model API takes; the catalog name is in _meta and the title.
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", t.name) for t in tools)
    listed = {t.meta["toolproxy/tool_id"]: t for t in tools}
    assert set(listed) == set(native)  # the same list-phase policy; no approval tool here
    assert "task.list" not in listed and "task.create" in listed
    for name, tool in listed.items():
        entry = native[name]
        assert tool.name == name.replace(".", "-") and tool.title.startswith(f"{name} (")
        assert tool.input_schema == published(entry["input_schema"])
        assert is_portable(tool.input_schema) and is_portable(tool.output_schema)
        assert tool.description == entry["description"]
        hints = tool.annotations
        assert hints.title == tool.title
        read = entry["action"] == "read"
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (read, not read, read)
        assert hints.open_world_hint is (entry["network"] or entry["category"] == "D")
    assert listed["task.create"].title == "task.create (controlled write)"
    assert listed["math"].title == "math (safe read)"


async def test_resume_tool_is_listed_only_with_tools_that_need_approval(client, token, team) -> None:
    tok = token(team=team)
    async with mcp_http(mcp_url(client), tok) as c:
        assert RESUME_TOOL not in {t.name for t in (await c.list_tools()).tools}
    await grant(client, token, team, "tool.testsvc.guarded.invoke")
    await asyncio.sleep(0.2)
    async with mcp_http(mcp_url(client), tok) as c:
        assert RESUME_TOOL in {t.name for t in (await c.list_tools()).tools}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_call_is_the_pipeline_call(client, token, team, db_pool, mode) -> None:
    tok = token(agent="mcp-agent", team=team)
    async with mcp_http(mcp_url(client), tok, mode) as c:
        result = await c.call_tool("testsvc.echo", {"say": "hi"},
                                   meta={"toolproxy/context": {"agent_run_id": "run-42"}})
    assert result.is_error is False
    out = result.structured_content
    assert out["said"] == "hi" and out["agent_id"] == "mcp-agent" and out["run_id"] == "run-42"
    assert out["team_id"] == team
    assert result.meta["toolproxy/call_id"] == out["call_id"]
    assert result.meta["toolproxy/status"] == "COMPLETED"
    assert result.content[0].text.startswith("{")
    row = await _usage_row(db_pool, out["call_id"])
    assert (row["status"], row["agent_run_id"], row["tool"]) == ("COMPLETED", "run-42", "testsvc.echo")


async def test_errors_are_results_and_protocol_errors_are_errors(client, token, team) -> None:
    async with mcp_http(mcp_url(client), token(team=team)) as c:
        denied = await c.call_tool("task.list", {})
        assert denied.is_error is True
        assert "Denied by policy" in denied.content[0].text and "grant_required" in denied.content[0].text
        # ... and what to do about it: the capability to ask governance for.
        assert "ask your team's governance for the capability tool.task.list.invoke" in denied.content[0].text
        assert denied.meta["toolproxy/error"]["error"]["code"] == "denied"
        assert denied.structured_content is None  # the body does not fit task.list's outputSchema
        failed = await c.call_tool("testsvc.fail", {})
        assert failed.is_error and "widget_broken" in failed.content[0].text
        bad = await c.call_tool("math", {"expr": 42})
        assert bad.is_error and bad.meta["toolproxy/error"]["error"]["code"] == "invalid_args"
        with pytest.raises(MCPError) as unknown:
            await c.call_tool("no.such.tool", {})
        assert unknown.value.error.code == -32602 and unknown.value.error.data == {"code": "unknown_tool"}
        with pytest.raises(MCPError) as shape:
            await c.call_tool("../etc/passwd", {})
        assert shape.value.error.code == -32602
        with pytest.raises(MCPError) as missing:
            await c.list_resources()
        assert missing.value.error.code == -32601
        with pytest.raises(MCPError) as team_ctx:  # the context goes through the same envelope
            await c.call_tool("math", {"expr": "1"}, meta={"toolproxy/context": {"agent_run_id": "no spaces"}})
        assert team_ctx.value.error.code == -32602


async def test_ping_in_the_handshake_era(client, token, team) -> None:
    async with mcp_http(mcp_url(client), token(team=team)) as c:
        with pytest.warns(Warning):
            await c.send_ping()


@pytest.mark.parametrize("mode, version, url", [("legacy", LEGACY, "base"), ("auto", MODERN, "/mcp")])
async def test_stdio_relay(client, token, team, mode, version, url) -> None:
    # --url takes the stack's base URL or the /mcp URL every HTTP client is given.
    given = base_url(client) if url == "base" else mcp_url(client) + "/"
    async with mcp_stdio(given, token(team=team), mode) as c:
        assert c.session.protocol_version == version
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"math", "text", "task-create"} - {"task-create"} <= names
        result = await c.call_tool("math", {"expr": "2+3*4"})
        assert result.structured_content == {"value": 14}
        denied = await c.call_tool("task-list", {})
        assert denied.is_error and denied.meta["toolproxy/error"]["status"] == "DENIED"
        with pytest.raises(MCPError):
            await c.call_tool("no.such.tool", {})


async def test_stdio_relay_reports_a_bad_token(client) -> None:
    with pytest.raises(Exception) as err:  # noqa: PT011 - the SDK wraps the connect failure
        async with mcp_stdio(base_url(client), "not-a-token") as c:
            await c.list_tools()
    assert "unauthenticated" in repr(err.value) or "invalid token" in repr(err.value)


# --- sessions: signed, bound to the identity, any worker --------------------------------------


async def test_session_is_bound_to_the_identity(client, token, team) -> None:
    alice, bob = token(agent="alice", team=team), token(agent="bob", team=team)
    sid = await session_of(client, alice)
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert (await raw(client, alice, ping, **{"Mcp-Session-Id": sid}))[0] == 200
    status, body, _ = await raw(client, bob, ping, **{"Mcp-Session-Id": sid})
    assert status == 404 and body["id"] == 2  # another identity's session does not exist
    forged = sid[:-4] + ("AAAA" if not sid.endswith("AAAA") else "BBBB")
    assert (await raw(client, alice, ping, **{"Mcp-Session-Id": forged}))[0] == 404
    status, body, _ = await raw(client, alice, ping)
    assert status == 400 and "Mcp-Session-Id" in body["error"]["message"]
    assert (await raw(client, None, ping, **{"Mcp-Session-Id": sid}))[0] == 401
    # Any supported version in the header is accepted, as the reference server does (the
    # conformance suite's server-sse-multiple-streams sends 2025-03-26); an unknown one is not.
    status, body, _ = await raw(client, alice, ping, **{"Mcp-Session-Id": sid,
                                                        "MCP-Protocol-Version": "2025-03-26"})
    assert status == 200 and body["result"] == {}
    status, body, _ = await raw(client, alice, ping, **{"Mcp-Session-Id": sid,
                                                        "MCP-Protocol-Version": "2099-01-01"})
    assert status == 400 and body["error"]["code"] == -32022


async def test_a_session_spans_worker_processes(database_url, nats_url, builtin, token, team) -> None:
    """Two `toolproxy serve` processes: every request of one SDK session alternates between
    them (as SO_REUSEPORT workers or replicas behind a balancer would)."""
    procs = [ProxyProcess(database_url, nats_url, TEST_SECRET) for _ in range(2)]
    try:
        await asyncio.gather(*(p.start() for p in procs))
        ports = itertools.cycle([p.port for p in procs])
        seen: list[int] = []

        class Alternate(httpx2.AsyncBaseTransport):
            def __init__(self) -> None:
                self.inner = httpx2.AsyncHTTPTransport()

            async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
                port = next(ports)
                seen.append(port)
                request.url = request.url.copy_with(port=port)
                return await self.inner.handle_async_request(request)

        for mode in ("legacy", "auto"):
            async with mcp_http(f"{procs[0].url}/mcp", token(team=team), mode, Alternate()) as c:
                for i in range(4):
                    result = await c.call_tool("math", {"expr": f"{i}+1"})
                    assert result.structured_content == {"value": i + 1}
        assert {p.port for p in procs} <= set(seen)
    finally:
        for p in procs:
            p.stop()


def test_session_ids_are_signed_and_expire() -> None:
    from proxy.identity.identity import Identity
    from proxy.web.mcp.session import MAX_AGE_S, SessionCodec

    me = Identity(agent_id="a", team_id="t", role="agent", token_id="")
    codec = SessionCodec("key-1")
    sid = codec.issue(me, LEGACY, now=1000.0)
    assert codec.open(sid, me, now=1000.0 + MAX_AGE_S - 1).protocol_version == LEGACY
    assert codec.open(sid, me, now=1000.0 + MAX_AGE_S + 1) is None
    assert SessionCodec("key-2").open(sid, me, now=1000.0) is None
    assert codec.open(sid, Identity(agent_id="a", team_id="u", role="agent", token_id=""), now=1000.0) is None
    assert codec.open("x" * 10_000, me) is None and codec.open("tp1.!!.!!", me) is None


async def test_stdio_relay_starts_a_new_session_when_the_old_one_is_gone(client, token, team) -> None:
    import io

    import aiohttp

    from cli.mcp_stdio import Relay

    out = io.BytesIO()
    relay = Relay(base_url(client), token(team=team), out)
    async with aiohttp.ClientSession() as relay.http:
        await relay.relay(init_body())
        first = relay.session_id
        relay.session_id = first[:-3] + "xyz"  # as if it had expired
        await relay.relay({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await relay.relay({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                           "params": {"name": "math", "arguments": {"expr": "1+1"}}})
    lines = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert [m["id"] for m in lines] == [1, 2]  # nothing written for the notification
    assert lines[1]["result"]["structuredContent"] == {"value": 2}
    assert relay.session_id not in (None, first)


# --- transport rules ------------------------------------------------------------------------


async def test_batches_only_where_the_revision_has_them(client, token, team) -> None:
    tok = token(team=team)
    old = await session_of(client, tok, "2025-03-26")
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "math", "arguments": {"expr": "6*7"}}}]
    status, body, _ = await raw(client, tok, batch, **{"Mcp-Session-Id": old})
    assert status == 200 and [m["id"] for m in body] == [1, 2]
    assert body[1]["result"]["structuredContent"] == {"value": 42}
    too_many = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(MAX_BATCH + 1)]
    assert (await raw(client, tok, too_many, **{"Mcp-Session-Id": old}))[0] == 400
    new = await session_of(client, tok, LEGACY)
    assert (await raw(client, tok, batch, **{"Mcp-Session-Id": new}))[0] == 400


async def test_notifications_are_accepted_and_get_405_on_other_methods(client, token, team) -> None:
    tok = token(team=team)
    sid = await session_of(client, tok)
    status, body, _ = await raw(client, tok, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                                **{"Mcp-Session-Id": sid})
    assert (status, body) == (202, None)
    for method in ("GET", "DELETE"):
        r = await client.request(method, "/mcp", headers={**bearer(tok), "Mcp-Session-Id": sid})
        assert r.status == 405 and "POST" in r.headers["Allow"]


async def test_unsupported_initialize_version_gets_ours(client, token, team) -> None:
    status, body, headers = await raw(client, token(team=team), init_body("1999-01-01"))
    assert status == 200 and body["result"]["protocolVersion"] == LEGACY
    assert body["result"]["serverInfo"]["name"] == "toolproxy"
    assert RESUME_TOOL in body["result"]["instructions"]


async def test_stateless_era_checks_its_envelope(client, token, team) -> None:
    tok = token(team=team)
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {}}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "math", "arguments": {"expr": "1+1"}, "_meta": meta}}
    ok = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "math"}
    status, body, _ = await raw(client, tok, call, **ok)
    assert status == 200 and body["result"]["structuredContent"] == {"value": 2}
    assert body["result"]["resultType"] == "complete"
    status, body, _ = await raw(client, tok, call, **{**ok, "Mcp-Name": "text"})
    assert status == 400 and body["error"]["code"] == -32020
    status, body, _ = await raw(client, tok, call, **{**ok, "Mcp-Method": "tools/list"})
    assert status == 400 and body["error"]["code"] == -32020
    future = {**call, "params": {**call["params"], "_meta": {**meta, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}}
    status, body, _ = await raw(client, tok, future, **{**ok, "MCP-Protocol-Version": "2099-01-01"})
    assert status == 400 and body["error"]["code"] == -32022
    assert MODERN in body["error"]["data"]["supported"]
    # The list depends on who asks (policy-filtered): never marked publicly cacheable.
    listing = {"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"_meta": meta}}
    status, body, _ = await raw(client, tok, listing, **{"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"})
    assert status == 200 and (body["result"]["cacheScope"], body["result"]["ttlMs"]) == ("private", 0), body
    assert "math" in {t["name"] for t in body["result"]["tools"]}
    ping = {"jsonrpc": "2.0", "id": 8, "method": "ping", "params": {"_meta": meta}}
    status, body, _ = await raw(client, tok, ping, **{**ok, "Mcp-Method": "ping"})
    assert status == 404 and body["error"]["code"] == -32601  # no ping at this revision
    status, body, _ = await raw(client, tok, [call], **ok)
    assert status == 400


async def test_bounded_and_well_formed_bodies(client, token, team) -> None:
    tok = token(team=team)
    sid = await session_of(client, tok)
    r = await client.post("/mcp", data=b"{nope", headers={**ACCEPT, **bearer(tok), "Mcp-Session-Id": sid,
                                                          "Content-Type": "application/json"})
    assert r.status == 400 and (await r.json())["error"]["code"] == -32700
    big = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": "text", "arguments": {"op": "upper", "text": "x" * (1 << 20)}}}
    assert (await raw(client, tok, big, **{"Mcp-Session-Id": sid}))[0] == 413
    status, body, _ = await raw(client, tok, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                              "params": {"arguments": {}}}, **{"Mcp-Session-Id": sid})
    assert status == 200 and body["error"]["code"] == -32602  # the SDK's wire type: name required
    status, _, _ = await raw(client, tok, {"jsonrpc": "1.0", "id": 1, "method": "ping"},
                             **{"Mcp-Session-Id": sid})
    assert status == 400
    r = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                          headers={**bearer(tok), "Accept": "text/html", "Mcp-Session-Id": sid})
    assert r.status == 406


async def _usage_row(db_pool: Any, call_id: str, timeout: float = 10.0) -> Any:
    import uuid

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        row = await db_pool.fetchrow("SELECT * FROM usage_records WHERE call_id = $1", uuid.UUID(call_id))
        if row is not None or loop.time() > deadline:
            return row
        await asyncio.sleep(0.05)



@pytest.mark.parametrize(("given", "endpoint"), [
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080/mcp"),
    ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/mcp"),
    ("http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080/mcp"),
    ("http://127.0.0.1:8080/mcp/", "http://127.0.0.1:8080/mcp"),
    ("https://gw.example/tools/mcp", "https://gw.example/tools/mcp"),
    ("https://gw.example/tools", "https://gw.example/tools/mcp"),
    ("http://h/mcp/sets/ops", "http://h/mcp/sets/ops"),
])
def test_stdio_relay_endpoint(given: str, endpoint: str) -> None:
    from cli.mcp_stdio import mcp_endpoint

    assert mcp_endpoint(given) == endpoint
