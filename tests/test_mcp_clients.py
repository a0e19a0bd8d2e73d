"""One test per MCP client library a user may bring, none written here: each lists the tools,
calls one, and — after the library's own conversion to OpenAI tools where it has one — every
function name fits `^[a-zA-Z0-9_-]{1,64}$` and every parameters schema is portable.

The official TypeScript SDK and the MCP Inspector's CLI (Node 22, cached), the Python `mcp`
SDK, fastmcp, openai-agents (in the dev extra) and langchain-mcp-adapters (a venv of its own:
it pins mcp<2). The TypeScript
SDK also takes a held call as a 2025-11-25 task, through to its result after an approval in
the console."""

from __future__ import annotations

import asyncio
import json
import os
import re
from typing import Any

import pytest

from tests.support.calls import bearer, grant
from tests.support.console_helpers import login
from tests.support.mcp_client import mcp_http, mcp_url
from tests.support.mcp_clients import (
    INSPECTOR,
    LANGCHAIN_PYTHON,
    NAME_RE,
    NODE,
    SCRIPTS,
    TS_SDK,
    missing,
    node_script,
    run,
)
from wire.portable_schema import problems

NAME = re.compile(NAME_RE)


async def granted(client: Any, token: Any, team: str) -> str:
    """An agent that may call a read tool, a write tool and a tool held for approval."""
    for cap in ("tool.task.create.invoke", "tool.task.list.invoke", "tool.testsvc.guarded.invoke"):
        await grant(client, token, team, cap)
    return token(agent="lib-user", team=team)


def check_functions(functions: list[dict[str, Any]]) -> None:
    assert functions
    for f in functions:
        assert NAME.fullmatch(f["name"]), f["name"]
        assert problems(f["parameters"]) == [], f["name"]


async def test_python_mcp_sdk(client, token, team) -> None:
    tok = await granted(client, token, team)
    async with mcp_http(mcp_url(client), tok) as c:
        tools = (await c.list_tools()).tools
        result = await c.call_tool("math", {"expr": "2+3*4"})
    assert all(NAME.fullmatch(t.name) for t in tools)
    assert {"task-create", "task-list", "testsvc-guarded", "math"} <= {t.name for t in tools}
    assert result.structured_content == {"value": 14}


async def test_fastmcp(client, token, team) -> None:
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    tok = await granted(client, token, team)
    async with Client(StreamableHttpTransport(mcp_url(client), headers=bearer(tok))) as c:
        tools = await c.list_tools()
        result = await c.call_tool("math", {"expr": "2+3*4"})
        called_by_catalog_name = await c.call_tool("task.create", {"title": "from fastmcp"})
    assert all(NAME.fullmatch(t.name) for t in tools)
    # fastmcp builds its result from the output schema: 14 stays an integer.
    assert result.data.value == 14 and type(result.data.value) is int
    assert called_by_catalog_name.structured_content["title"] == "from fastmcp"


async def test_openai_agents(client, token, team) -> None:
    from agents import Agent
    from agents.mcp import MCPServerStreamableHttp, MCPUtil
    from agents.models.chatcmpl_converter import Converter
    from agents.run_context import RunContextWrapper

    tok = await granted(client, token, team)
    agent = Agent(name="toolproxy-user")
    async with MCPServerStreamableHttp({"url": mcp_url(client), "headers": bearer(tok)},
                                       client_session_timeout_seconds=30) as server:
        for strict in (False, True):  # its default, and its strict-schema conversion
            tools = await MCPUtil.get_all_function_tools([server], strict, RunContextWrapper(None), agent)
            check_functions([Converter.tool_to_openai(t)["function"] for t in tools])
        result = await server.call_tool("math", {"expr": "2+3*4"})
    assert result.structured_content == {"value": 14}


@pytest.mark.skipif(bool(missing(LANGCHAIN_PYTHON)), reason=str(missing(LANGCHAIN_PYTHON)))
async def test_langchain_mcp_adapters(client, token, team) -> None:
    tok = await granted(client, token, team)
    code, out, err = await run(str(LANGCHAIN_PYTHON), str(SCRIPTS / "langchain_client.py"),
                               mcp_url(client), env={"TOOLPROXY_TOKEN": tok}, timeout=60)
    assert code == 0, err[-2000:]
    report = json.loads(out.strip().splitlines()[-1])
    check_functions(report["functions"])
    assert {"task-create", "testsvc-guarded"} <= {f["name"] for f in report["functions"]}
    assert "14" in report["math"]


@pytest.mark.skipif(bool(missing(NODE, TS_SDK)), reason=str(missing(NODE, TS_SDK)))
async def test_typescript_sdk(client, token, team) -> None:
    tok = await granted(client, token, team)
    code, out, err = await run(str(NODE), str(node_script("ts_client.mjs")), "list-call",
                               mcp_url(client), env={"TOOLPROXY_TOKEN": tok}, timeout=60)
    assert code == 0, err[-2000:]
    events = {e["event"]: e for e in map(json.loads, out.splitlines())}
    assert all(NAME.fullmatch(n) for n in events["tools"]["names"])
    assert "task.create (controlled write)" in events["tools"]["titles"]
    assert events["result"]["result"]["structuredContent"] == {"value": 14}


@pytest.mark.skipif(bool(missing(NODE, TS_SDK)), reason=str(missing(NODE, TS_SDK)))
async def test_typescript_sdk_takes_a_held_call_as_a_task(client, token, team) -> None:
    tok = await granted(client, token, team)
    gov = token(agent="gov", team=team, role="governance")
    proc = await asyncio.create_subprocess_exec(
        str(NODE), str(node_script("ts_client.mjs")), "task", mcp_url(client),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TOOLPROXY_TOKEN": tok, "TOOLPROXY_TASK_TOOL": "testsvc-guarded"},
        cwd=str(NODE.parents[2]))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        events = []
        while not events or events[-1]["event"] != "taskCreated":
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
            assert line, (await proc.stderr.read()).decode()[-2000:]  # type: ignore[union-attr]
            events.append(json.loads(line))
        task_id = events[-1]["taskId"]
        r = await client.get("/v1/approvals", headers=bearer(gov))
        approval = next(a for a in (await r.json())["approvals"] if a["call_id"] == task_id)
        console = await login(client, gov)
        status, body = await console.post(f"/v1/approvals/{approval['approval_id']}/decision",
                                          {"decision": "approve", "reason": "ok"})
        assert status == 200, body
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    rest = [json.loads(line) for line in out.decode().splitlines()]
    assert proc.returncode == 0, err.decode()[-2000:]
    result = next(e for e in rest if e["event"] == "result")["result"]
    assert result["structuredContent"] == {"done": 2} and result["isError"] is False
    assert [e["status"] for e in rest if e["event"] == "taskStatus"][-1] == "completed"


@pytest.mark.skipif(bool(missing(NODE, INSPECTOR)), reason=str(missing(NODE, INSPECTOR)))
async def test_mcp_inspector_cli_strict(client, token, team, tmp_path) -> None:
    """The MCP Inspector's CLI (2.12.0): `tools/list --strict` finds no schema it would call
    unportable (it exits 6 on an error-severity problem, such as the boolean subschemas it
    counted 89 of before), every name fits, and a tool called by its listed name answers."""
    tok = await granted(client, token, team)
    # Its catalog of servers goes to a scratch file, never the user's home.
    env = {"MCP_CATALOG_PATH": str(tmp_path / "catalog.json")}
    target = [str(INSPECTOR), "--cli", mcp_url(client), "--transport", "http",
              "--header", f"Authorization: Bearer {tok}"]
    code, out, err = await run(str(NODE), *target, "--method", "tools/list", "--strict", env=env, timeout=90)
    assert code == 0, (code, err[-3000:])
    tools = json.loads(out)["tools"]
    assert all(NAME.fullmatch(t["name"]) for t in tools)
    assert {"task-create", "task-list", "testsvc-guarded", "math"} <= {t["name"] for t in tools}
    code, out, err = await run(str(NODE), *target, "--method", "tools/call", "--tool-name", "task-create",
                               "--tool-arg", "title=from the inspector", env=env, timeout=90)
    assert code == 0, (code, err[-3000:])
    assert json.loads(out)["structuredContent"]["title"] == "from the inspector"
