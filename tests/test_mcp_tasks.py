"""Calls held for approval as MCP tasks, end to end: a client that takes tasks gets one, polls
it, and sees it complete with the tool's result (or the denial) once governance decides in the
console (its API, with the session cookie and CSRF token); it can cancel it. The stateless era
through fastmcp's tasks client (fastmcp-tasks, the io.modelcontextprotocol/tasks extension),
2025-11-25's task augmentation over raw JSON-RPC here and through the official TypeScript SDK
in tests/test_mcp_clients.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastmcp import Client as FastMCPClient
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.exceptions import ToolError
from fastmcp_tasks.client import call_tool_task

from proxy.core.notices import RESUME_TOOL
from tests.support.calls import bearer, grant
from tests.support.console_helpers import login
from tests.support.fixture_services import guarded_calls
from tests.support.mcp_client import LEGACY, init_body, mcp_url, raw

GUARDED = "testsvc-guarded"  # testsvc.guarded, as /mcp lists it


async def approval_of(client: Any, gov: str, call_id: str) -> str:
    r = await client.get("/v1/approvals", headers=bearer(gov))
    found = [a for a in (await r.json())["approvals"] if a["call_id"] == call_id]
    assert found, call_id
    return str(found[0]["approval_id"])


async def decide_in_console(client: Any, gov: str, call_id: str, decision: str) -> None:
    console = await login(client, gov)
    status, body = await console.post(f"/v1/approvals/{await approval_of(client, gov, call_id)}/decision",
                                      {"decision": decision, "reason": "from the console"})
    assert status == 200, body


def fastmcp_client(client: Any, tok: str) -> FastMCPClient:
    return FastMCPClient(StreamableHttpTransport(mcp_url(client), headers=bearer(tok)))


async def test_a_held_call_is_a_task_that_completes_once_approved(client, token, team) -> None:
    await grant(client, token, team, "tool.testsvc.guarded.invoke")
    tok, gov = token(agent="tasker", team=team), token(agent="gov", team=team, role="governance")
    async with fastmcp_client(client, tok) as c:
        names = {t.name for t in await c.list_tools()}
        assert GUARDED in names and RESUME_TOOL not in names  # it takes tasks: no pseudo-tool
        task = await call_tool_task(c, GUARDED, {"amount": 3})
        status = await task.status()
        assert status.status == "working" and "governance approval" in (status.status_message or "")
        assert not [g for g in guarded_calls if g["call_id"] == task.task_id]  # nothing ran
        await decide_in_console(client, gov, task.task_id, "approve")
        result = await asyncio.wait_for(task.result(), 30)
        assert result.is_error is False and result.structured_content == {"done": 3}
        again = await task.status()  # polling again answers the same ending, nothing reruns
        assert again.status == "completed"
    assert len([g for g in guarded_calls if g["call_id"] == task.task_id]) == 1


async def test_a_denied_task_completes_with_the_denial(client, token, team) -> None:
    await grant(client, token, team, "tool.testsvc.guarded.invoke")
    tok, gov = token(agent="tasker", team=team), token(agent="gov", team=team, role="governance")
    async with fastmcp_client(client, tok) as c:
        task = await call_tool_task(c, GUARDED, {"amount": 4}, raise_on_error=False)
        await decide_in_console(client, gov, task.task_id, "deny")
        result = await asyncio.wait_for(task.result(), 30)
        assert result.is_error is True
        text = result.content[0].text
        assert "Denied by policy; nothing was executed" in text and "approval_denied" in text
        assert "do not repeat it" in text
        final = await task.status()
        assert final.status == "completed"  # a tool result with isError, not a protocol failure
    assert not [g for g in guarded_calls if g["call_id"] == task.task_id]


async def test_a_task_is_cancelled_and_only_its_own_agent_sees_it(client, token, team) -> None:
    await grant(client, token, team, "tool.testsvc.guarded.invoke")
    tok, other = token(agent="tasker", team=team), token(agent="someone-else", team=team)
    async with fastmcp_client(client, tok) as c:
        task = await call_tool_task(c, GUARDED, {"amount": 5})
        async with fastmcp_client(client, other) as o:
            with pytest.raises(Exception, match="Task not found"):
                await call_tool_task.__globals__["_send_get"](o.session, task.task_id)
        await task.cancel()
        assert (await task.status()).status == "cancelled"
        with pytest.raises(ToolError):
            await task.result()
    r = await client.get(f"/v1/calls/{task.task_id}", headers=bearer(tok))
    assert (await r.json())["status"] == "CANCELLED"


async def test_task_augmentation_in_2025_11_25(client, token, team) -> None:
    """The 2025-11-25 shape, message by message (the TypeScript SDK drives it too)."""
    await grant(client, token, team, "tool.testsvc.guarded.invoke")
    tok, gov = token(agent="legacy", team=team), token(agent="gov", team=team, role="governance")
    init = init_body(LEGACY)
    init["params"]["capabilities"] = {"tasks": {"cancel": {}}}
    status, body, headers = await raw(client, tok, init)
    caps = body["result"]["capabilities"]
    assert caps["tasks"] == {"cancel": {}, "requests": {"tools": {"call": {}}}}
    sid = {"Mcp-Session-Id": headers["Mcp-Session-Id"]}

    async def rpc(method: str, params: dict[str, Any], i: int = 2) -> dict[str, Any]:
        _, reply, _ = await raw(client, tok, {"jsonrpc": "2.0", "id": i, "method": method,
                                              "params": params}, **sid)
        return reply

    tools = {t["name"]: t for t in (await rpc("tools/list", {}))["result"]["tools"]}
    assert tools[GUARDED]["execution"] == {"taskSupport": "optional"}
    assert "execution" not in tools["math"] and RESUME_TOOL not in tools
    created = (await rpc("tools/call", {"name": GUARDED, "arguments": {"amount": 6},
                                        "task": {"ttl": 60000}}))["result"]
    task = created["task"]
    assert task["status"] == "working" and task["pollInterval"] == 500
    assert "Held for a governance approval" in created["_meta"]["io.modelcontextprotocol/model-immediate-response"]
    got = (await rpc("tasks/get", {"taskId": task["taskId"]}))["result"]
    assert got["status"] == "working" and got["createdAt"] and got["ttl"] > 0
    waiting = asyncio.create_task(rpc("tasks/result", {"taskId": task["taskId"]}, 9))
    await asyncio.sleep(0.2)
    assert not waiting.done()  # tasks/result blocks until the task ends
    await decide_in_console(client, gov, task["taskId"], "approve")
    result = (await asyncio.wait_for(waiting, 30))["result"]
    assert result["structuredContent"] == {"done": 6} and result["isError"] is False
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
    assert (await rpc("tasks/get", {"taskId": task["taskId"]}))["result"]["status"] == "completed"
    ended = await rpc("tasks/cancel", {"taskId": task["taskId"]})
    assert ended["error"]["code"] == -32602 and "already completed" in ended["error"]["message"]
    missing = await rpc("tasks/get", {"taskId": "00000000-0000-4000-8000-000000000000"})
    assert missing["error"] == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
    # A call that is not held still answers a task when augmented: it ended at once.
    quick = (await rpc("tools/call", {"name": "math", "arguments": {"expr": "6*7"}, "task": {}}))["result"]
    done = (await rpc("tasks/get", {"taskId": quick["task"]["taskId"]}))["result"]
    assert done["status"] == "completed"
    value = (await rpc("tasks/result", {"taskId": quick["task"]["taskId"]}))["result"]
    assert value["structuredContent"] == {"value": 42}


async def test_clients_without_tasks_keep_the_error_result_and_resume(client, token, team) -> None:
    await grant(client, token, team, "tool.testsvc.guarded.invoke")
    tok = token(agent="plain", team=team)
    status, body, headers = await raw(client, tok, init_body(LEGACY))
    sid = {"Mcp-Session-Id": headers["Mcp-Session-Id"]}
    _, listed, _ = await raw(client, tok, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, **sid)
    names = {t["name"] for t in listed["result"]["tools"]}
    assert RESUME_TOOL in names
    _, held, _ = await raw(client, tok, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                         "params": {"name": GUARDED, "arguments": {"amount": 7}}}, **sid)
    result = held["result"]
    assert result["isError"] is True and RESUME_TOOL in result["content"][0]["text"]
    assert not result["content"][0]["text"].rstrip().endswith("granted.")
