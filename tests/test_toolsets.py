"""Tool sets: governance names a subset of the catalog for its team (/v1/admin/toolsets), served
at /mcp/sets/<name> through the same policy; tenant-isolated; followed by every replica."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from aiohttp.test_utils import TestClient
from mcp.shared.exceptions import MCPError

from proxy.web import keys as appkeys
from proxy.web.app import create_app
from services.builtin import BUILTIN_TOOLS
from tests.support.calls import bearer, grant
from tests.support.cli_command import cli
from tests.support.mcp_client import ACCEPT, LEGACY, init_body, mcp_http

SETS = "/v1/admin/toolsets"


async def put(client: TestClient, tok: str, **body: object) -> tuple[int, dict]:
    r = await client.post(SETS, json=body, headers=bearer(tok))
    return r.status, await r.json()


async def rpc(client: TestClient, path: str, tok: str | None, body: dict, **headers: str) -> tuple[int, dict, dict]:
    h = {**ACCEPT, **headers, **(bearer(tok) if tok else {})}
    r = await client.post(path, json=body, headers=h)
    text = await r.text()
    return r.status, (orjson.loads(text) if text else {}), dict(r.headers)


async def test_governance_manages_its_own_teams_sets_only(client, token, team) -> None:
    gov = token(agent="gov", team=team, role="governance")
    status, body = await put(client, gov, name="reader", team_id=team, tools=["math", "text", "math"])
    assert status == 201 and body["created"] is True, body
    assert body["toolset"]["tools"] == ["math", "text"] and body["toolset"]["endpoint"] == "/mcp/sets/reader"
    assert body["toolset"]["created_by"] == f"governance:gov@{team}"
    status, body = await put(client, gov, name="reader", team_id=team, tools=["math"])
    assert status == 200 and body["created"] is False and body["toolset"]["tools"] == ["math"]
    # Another team's governance: nothing made, nothing seen, nothing deleted.
    other = token(agent="gov", team=f"{team}x", role="governance")
    status, body = await put(client, other, name="reader", team_id=team, tools=["math"])
    assert status == 403 and body["error"]["code"] == "forbidden"
    r = await client.get(f"{SETS}?team_id={team}", headers=bearer(other))
    assert r.status == 403
    assert (await (await client.get(SETS, headers=bearer(other))).json())["toolsets"] == []
    r = await client.delete(f"{SETS}/reader?team_id={team}", headers=bearer(other))
    assert r.status == 403
    r = await client.delete(f"{SETS}/reader", headers=bearer(other))  # its own team: none
    assert r.status == 404
    # Agents never manage sets; admins manage any team's.
    status, _ = await put(client, token(agent="a", team=team), name="mine", team_id=team, tools=["math"])
    assert status == 403
    admin = token(agent="root", team="ops", role="admin")
    status, body = await put(client, admin, name="by-admin", team_id=team, tools=["text"])
    assert status == 201 and body["toolset"]["team_id"] == team
    listed = (await (await client.get(SETS, headers=bearer(gov))).json())["toolsets"]
    assert [s["name"] for s in listed] == ["by-admin", "reader"]
    r = await client.get(f"{SETS}/reader", headers=bearer(gov))
    assert r.status == 200 and (await r.json())["toolset"]["tools"] == ["math"]
    r = await client.delete(f"{SETS}/by-admin?team_id={team}", headers=bearer(admin))
    assert r.status == 200 and (await r.json())["deleted"] is True
    r = await client.get(f"{SETS}/by-admin", headers=bearer(gov))
    assert r.status == 404


async def test_bad_sets_are_refused_with_stable_codes(client, token, team) -> None:
    gov = token(agent="gov", team=team, role="governance")
    status, body = await put(client, gov, name="s", team_id=team, tools=["math", "no.such", "nosuch"])
    assert status == 404 and body["error"]["code"] == "unknown_tool"
    assert body["unknown_tools"] == ["no.such", "nosuch"]
    for bad in ({"name": "Bad", "tools": ["math"]}, {"name": "a" * 65, "tools": ["math"]},
                {"name": "a/b", "tools": ["math"]}, {"name": "ok", "tools": []},
                {"name": "ok", "tools": ["math"] * 129}, {"name": "ok", "tools": ["Math"]},
                {"name": "ok", "tools": ["math"], "extra": 1}):
        status, body = await put(client, gov, team_id=team, **bad)
        assert status == 400 and body["error"]["code"] == "invalid_request", (bad, body)
    assert (await (await client.get(SETS, headers=bearer(gov))).json())["toolsets"] == []
    r = await client.get(f"{SETS}/NOT_A_NAME", headers=bearer(gov))
    assert r.status == 404


async def test_a_set_is_its_own_mcp_endpoint_filtered_by_policy(client, token, team, bus_spy) -> None:
    gov = token(agent="gov", team=team, role="governance")
    await grant(client, token, team, "tool.task.list.invoke")
    # greenfood.order is in the set, but this team has no grant: the policy keeps it out.
    status, _ = await put(client, gov, name="short", team_id=team,
                          tools=["math", "task.list", "greenfood.order"])
    assert status == 201
    agent = token(agent="worker", team=team)
    url = str(client.make_url("/mcp/sets/short"))
    async with mcp_http(url, agent) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        result = await c.call_tool("math", {"expr": "6*7"})
    assert names == {"math", "task-list"}
    assert result.structured_content == {"value": 42}
    # The stateless era too, and a call outside the set: unknown, nothing published, logged.
    async with mcp_http(url, agent, mode="auto") as c:
        assert {t.name for t in (await c.list_tools()).tools} == {"math", "task-list"}
        with pytest.raises(MCPError) as outside:
            await c.call_tool("text", {"op": "upper", "text": "x"})
    assert outside.value.error.code == -32602 and outside.value.error.data == {"code": "unknown_tool"}
    assert outside.value.error.message == "Unknown tool: text"
    await bus_spy.settle()
    assert not [s for s in bus_spy.subjects if s.startswith("tools.text.")]
    for _ in range(200):
        r = await client.get("/v1/admin/decisions", params={"team_id": team, "tool": "text"}, headers=bearer(gov))
        rows = (await r.json())["decisions"]
        if rows:
            break
        await asyncio.sleep(0.05)
    (row,) = rows
    assert (row["result"], row["reasons"], row["engine"], row["phase"]) == ("deny", ["not_in_toolset"], "toolset", "call")
    assert row["agent_id"] == "worker" and row["input"]["context"] == {"toolset": "short"}
    # The whole /mcp still lists what the policy allows (the set narrows only its endpoint).
    async with mcp_http(str(client.make_url("/mcp")), agent) as c:
        assert "text" in {t.name for t in (await c.list_tools()).tools}


async def test_another_teams_token_gets_nothing(client, token, team) -> None:
    gov = token(agent="gov", team=team, role="governance")
    assert (await put(client, gov, name="mine", team_id=team, tools=["math"]))[0] == 201
    stranger = token(agent="worker", team=f"{team}x")
    status, body, _ = await rpc(client, "/mcp/sets/mine", stranger, init_body(LEGACY))
    assert status == 404 and body["error"]["data"]["code"] == "toolset_not_found"
    status, same, _ = await rpc(client, "/mcp/sets/never-made", stranger, init_body(LEGACY))
    assert status == 404 and same["error"] == body["error"] | {"message": same["error"]["message"]}
    # No token: the MCP challenge of /mcp, the resource a set's endpoint is part of.
    status, body, headers = await rpc(client, "/mcp/sets/mine", None, init_body(LEGACY))
    assert status == 401
    base = str(client.make_url("")).rstrip("/")
    assert f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in headers["WWW-Authenticate"]
    # A foreign Origin is refused on a set as on /mcp.
    status, _, _ = await rpc(client, "/mcp/sets/mine", gov, init_body(LEGACY), Origin="https://evil.example")
    assert status == 403


async def test_every_replica_follows_a_change(aiohttp_client, settings, builtin, client, token, team) -> None:
    other_app = create_app(settings)
    other: TestClient = await aiohttp_client(other_app)
    await other_app[appkeys.CATALOG].wait_available(list(BUILTIN_TOOLS), timeout=10)
    gov = token(agent="gov", team=team, role="governance")
    agent = token(agent="worker", team=team)
    sets = other_app[appkeys.TOOLSETS]

    async def until(expected: frozenset[str] | None) -> None:
        for _ in range(200):  # a NOTIFY away: within milliseconds
            if sets.tools(team, "live") == expected:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"the other replica never saw {expected}")

    assert (await put(client, gov, name="live", team_id=team, tools=["math"]))[0] == 201
    await until(frozenset({"math"}))
    async with mcp_http(str(other.make_url("/mcp/sets/live")), agent) as c:
        assert {t.name for t in (await c.list_tools()).tools} == {"math"}
    assert (await put(client, gov, name="live", team_id=team, tools=["math", "text"]))[0] == 200
    await until(frozenset({"math", "text"}))
    r = await client.delete(f"{SETS}/live", headers=bearer(gov))
    assert r.status == 200
    await until(None)
    status, body, _ = await rpc(other, "/mcp/sets/live", agent, init_body(LEGACY))
    assert status == 404 and body["error"]["data"]["code"] == "toolset_not_found"


async def test_the_command_line_mirrors_the_routes(client, team) -> None:
    url = str(client.make_url("")).rstrip("/")
    code, out, err = await cli("toolsets", "add", "cli-set", "--team", team, "--tool", "math",
                               "--tool", "text", "--url", url)
    assert code == 0 and out.startswith("created ") and "/mcp/sets/cli-set" in out, err
    code, out, err = await cli("toolsets", "list", "--team", team, "--url", url)
    assert code == 0 and "cli-set" in out and "math, text" in out, err
    code, out, err = await cli("toolsets", "remove", "cli-set", "--team", team, "--url", url)
    assert code == 0 and out.strip() == f"removed cli-set (team {team})", err
