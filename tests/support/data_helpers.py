"""Helpers for the data-family tests: grant tools to an agent, call them, wait for events."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp.test_utils import TestClient

from tests.support.calls import bearer, grant, invoke

async def grant_tools(client: TestClient, token: Callable[..., str], team: str, *tools: str,
                      agent: str | None = None, timeout: float = 10.0) -> None:
    """Grant each tool, then wait until the PDP sees them (grants travel by LISTEN/NOTIFY):
    the catalog the agent is shown lists a tool only once it may call it."""
    for t in tools:
        await grant(client, token, team, f"tool.{t}.invoke", agent_id=agent)
    tok = token(agent=agent or "agent-1", team=team)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        r = await client.get("/v1/tools", headers=bearer(tok))
        listed = {e["tool_id"] for e in (await r.json())["tools"]}
        if set(tools) <= listed:
            return
        assert loop.time() < deadline, f"grants for {set(tools) - listed} never took effect"
        await asyncio.sleep(0.05)


async def ok(client: TestClient, tok: str, tool: str, args: dict[str, Any] | None = None,
             **extra: Any) -> dict[str, Any]:
    """Call a tool that must complete; its whole body."""
    status, body = await invoke(client, tok, tool, args, **extra)
    assert (status, body.get("status")) == (200, "COMPLETED"), body
    return body


async def tool_failure(client: TestClient, tok: str, tool: str, args: dict[str, Any],
                       http_status: int, tool_code: str) -> dict[str, Any]:
    """Call a tool that must report its own error `tool_code` (FAILED, tool_error)."""
    status, body = await invoke(client, tok, tool, args)
    assert status == http_status, body
    assert body["status"] == "FAILED" and body["error"]["code"] == "tool_error", body
    assert body["error"]["tool_code"] == tool_code, body
    assert body["call_id"] and body["result_id"], body
    return body


async def events_of(client: TestClient, tok: str, call_id: str, *, want: str,
                    timeout: float = 10.0) -> list[dict[str, Any]]:
    """The events of one call, once one of type `want` is among them (or after `timeout`)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        r = await client.get("/v1/events", params={"cursor": "0", "limit": "1000"},
                             headers=bearer(tok))
        assert r.status == 200, await r.text()
        mine = [e for e in (await r.json())["events"] if e.get("call_id") == call_id]
        if any(e["type"] == want for e in mine) or loop.time() > deadline:
            return mine
        await asyncio.sleep(0.05)


BOUNDARY = "boundary"  # refused by the proxy's input scan (NUL, beyond 64 bits) before the schema


def assert_bad_input(status: int, body: dict[str, Any], where: str) -> None:
    """400 before anything ran: `invalid_request` from the input scan (where == BOUNDARY),
    else `invalid_args` naming the offending place in the tool's input schema."""
    if where == BOUNDARY:
        assert (status, body["error"]["code"]) == (400, "invalid_request"), body
    else:
        assert (status, body["error"]["code"]) == (400, "invalid_args"), body
        assert f"at {where}" in body["error"]["message"], body
    assert "call_id" not in body, body
