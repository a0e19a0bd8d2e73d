"""The MCP surface through the official SDK's client (streamable HTTP, both protocol eras, and
stdio through `toolproxy mcp-stdio`), plus the transport rules a client library hides."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from proxy.mcp.notices import RESUME_TOOL
from proxy.mcp.protocol import MAX_BATCH
from tests.conftest import TEST_SECRET, bearer, grant
from tests.infra import ProxyProcess

ROOT = Path(__file__).resolve().parents[1]
LEGACY, MODERN = "2025-11-25", "2026-07-28"
ACCEPT = {"Accept": "application/json, text/event-stream"}


@contextlib.asynccontextmanager
async def mcp_http(url: str, tok: str, mode: str = "legacy",
                   transport: httpx2.AsyncBaseTransport | None = None) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP; mode "legacy" (initialize) or "auto" (discover)."""
    http = httpx2.AsyncClient(headers=bearer(tok), transport=transport, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as c:
        yield c


@contextlib.asynccontextmanager
async def mcp_stdio(base_url: str, tok: str, mode: str = "legacy") -> AsyncIterator[Client]:
    """The SDK's client launching `toolproxy mcp-stdio` as a desktop client would."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "proxy.cli.main", "mcp-stdio", "--url", base_url],
        env={**os.environ, "TOOLPROXY_TOKEN": tok}, cwd=str(ROOT))
    async with Client(params, mode=mode) as c:
        yield c


def mcp_url(client: Any) -> str:
    return str(client.make_url("/mcp"))


def base_url(client: Any) -> str:
    return str(client.make_url("/")).rstrip("/")


async def raw(client: Any, tok: str | None, body: Any, **headers: str) -> tuple[int, Any, Any]:
    h = {**ACCEPT, **headers, **(bearer(tok) if tok else {})}
    r = await client.post("/mcp", json=body, headers=h)
    text = await r.text()
    return r.status, (orjson.loads(text) if text else None), r.headers


def init_body(version: str = LEGACY, request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "1"}}}


async def session_of(client: Any, tok: str, version: str = LEGACY) -> str:
    status, body, headers = await raw(client, tok, init_body(version))
    assert status == 200 and body["result"]["protocolVersion"] == version, body
    return headers["Mcp-Session-Id"]


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
        listed = {t.name: t for t in (await c.list_tools()).tools}
    assert set(listed) == set(native)  # the same list-phase policy; no approval tool here
    assert "task.list" not in listed and "task.create" in listed
    for name, tool in listed.items():
        entry = native[name]
        assert tool.input_schema == entry["input_schema"]
        assert tool.description == entry["description"]
        if entry["action"] == "read":
            assert tool.annotations.read_only_hint is True
            assert not tool.annotations.destructive_hint
        else:
            assert tool.annotations.read_only_hint is False
            assert tool.annotations.destructive_hint is True
    assert listed["task.create"].annotations.destructive_hint is True
    assert listed["math"].annotations.read_only_hint is True


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


@pytest.mark.parametrize("mode, version", [("legacy", LEGACY), ("auto", MODERN)])
async def test_stdio_relay(client, token, team, mode, version) -> None:
    async with mcp_stdio(base_url(client), token(team=team), mode) as c:
        assert c.session.protocol_version == version
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"math", "text"} <= names
        result = await c.call_tool("math", {"expr": "2+3*4"})
        assert result.structured_content == {"value": 14}
        denied = await c.call_tool("task.list", {})
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
    status, body, _ = await raw(client, alice, ping, **{"Mcp-Session-Id": sid,
                                                        "MCP-Protocol-Version": "2025-06-18"})
    assert status == 400


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
    from proxy.identity import Identity
    from proxy.mcp.session import MAX_AGE_S, SessionCodec

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

    from proxy.cli.mcp_stdio import Relay

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

