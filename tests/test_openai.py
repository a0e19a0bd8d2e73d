"""The OpenAI-compatible surface, with the `openai` package's own types building the tool calls
and parsing the tools and the tool messages."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import pytest
from openai.types.chat import ChatCompletionFunctionTool, ChatCompletionToolMessageParam
from pydantic import TypeAdapter

from proxy.core.notices import RESUME_TOOL
from proxy.core.tool_names import OPENAI_NAME_RE, from_openai, to_openai
from proxy.core.tool_calls import MAX_ARGUMENTS_BYTES, MAX_TOOL_CALLS
from wire.manifest import is_valid_tool_name
from tests.support.calls import bearer, grant
from tests.support.openai_calls import assistant, post_calls, tool_call

TOOL_MESSAGE = TypeAdapter(ChatCompletionToolMessageParam)


def contents(body: dict) -> list[Any]:
    """Each message validated as an OpenAI tool message; its content decoded."""
    out = []
    for m in body["messages"]:
        TOOL_MESSAGE.validate_python(m)
        assert m["role"] == "tool"
        out.append(orjson.loads(m["content"]))
    return out


# --- names ----------------------------------------------------------------------------------


@pytest.mark.parametrize("tool_id", ["math", "task.list", "greenfood.order", "a_b.c_d.e", "x" * 64])
def test_names_map_reversibly(tool_id: str) -> None:
    name = to_openai(tool_id)
    assert OPENAI_NAME_RE.fullmatch(name) and "." not in name and len(name) == len(tool_id)
    assert from_openai(name) == tool_id


@pytest.mark.parametrize("name", ["a--b", "-a", "a-", "A-b", "a-_b", "_toolproxy_resume", "a-1b"])
def test_names_outside_the_image_never_become_catalog_names(name: str) -> None:
    assert not is_valid_tool_name(from_openai(name))


@pytest.mark.parametrize("name", ["task.list", "a b", "x" * 65, "", "tâche", "a/b"])
def test_names_openai_forbids_are_refused(name: str) -> None:
    with pytest.raises(ValueError):
        from_openai(name)


# --- the catalog as tools -------------------------------------------------------------------


async def test_tools_are_the_callable_catalog(client, token, team) -> None:
    await grant(client, token, team, "tool.task.create.invoke")
    await asyncio.sleep(0.2)
    tok = token(team=team)
    native = {t["tool_id"]: t for t in (await (await client.get("/v1/tools", headers=bearer(tok))).json())["tools"]}
    r = await client.get("/v1/openai/tools", headers=bearer(tok))
    assert r.status == 200
    body = await r.json()
    tools = [ChatCompletionFunctionTool.model_validate(t) for t in body["tools"]]
    assert {t.type for t in tools} == {"function"}
    by_name = {t.function.name: t.function for t in tools}
    assert {from_openai(n) for n in by_name} == set(native)
    assert body["names"] == {to_openai(k): k for k in native}
    assert by_name["task-create"].parameters == native["task.create"]["input_schema"]
    assert by_name["math"].description == native["math"]["description"]
    assert "task-list" not in by_name


# --- tool calls -----------------------------------------------------------------------------


async def test_tool_calls_answer_with_tool_messages(client, token, team, db_pool) -> None:
    tok = token(agent="oa", team=team)
    message = assistant(tool_call("math", {"expr": "2+3*4"}, "call_a"),
                        tool_call("testsvc-echo", {"say": "hi"}, "call_b"),
                        tool_call("task-list", {}, "call_c"))
    status, body = await post_calls(client, tok, message, context={"agent_run_id": "run-oa"})
    assert status == 200
    assert [m["tool_call_id"] for m in body["messages"]] == ["call_a", "call_b", "call_c"]
    math, echo, denied = contents(body)
    assert math == {"value": 14}
    assert echo["said"] == "hi" and echo["run_id"] == "run-oa" and echo["agent_id"] == "oa"
    assert denied["ok"] is False and denied["status"] == "DENIED"
    assert denied["error"]["reasons"] == ["grant_required"]
    assert "nothing was executed" in denied["explanation"]
    results = body["results"]
    assert [r["http_status"] for r in results] == [200, 200, 403]
    assert results[1]["body"]["output"] == echo


async def test_per_call_errors_do_not_fail_the_batch(client, token, team, bus_spy) -> None:
    message = assistant(tool_call("no-such-tool", {}, "c1"), tool_call("math", "{not json", "c2"),
                        tool_call("math", [1, 2], "c3"), tool_call("math", {"expr": 7}, "c4"),
                        tool_call("Math", {}, "c5"), tool_call("math", {"expr": "1"}, "c6"))
    status, body = await post_calls(client, token(team=team), message)
    assert status == 200
    codes = [c.get("error", {}).get("code") if isinstance(c, dict) else None for c in contents(body)]
    assert codes == ["unknown_tool", "invalid_args", "invalid_args", "invalid_args",
                     "invalid_request", None]
    assert [r["http_status"] for r in body["results"]] == [404, 400, 400, 400, 400, 200]
    await bus_spy.settle()
    assert bus_spy.subjects == ["tools.math.invoke"]  # only the valid call reached a service


async def test_reads_run_in_parallel_and_writes_in_order(client, token, team) -> None:
    tok = token(team=team)
    slow = [tool_call("testsvc-slow", {"seconds": 0.25}) for _ in range(4)]
    t0 = time.perf_counter()
    status, body = await post_calls(client, tok, assistant(*slow))
    assert status == 200 and all(c == {"slept": 0.25} for c in contents(body))
    assert time.perf_counter() - t0 < 0.8  # four 0.25 s reads, together

    await grant(client, token, team, "tool.task.create.invoke")
    await grant(client, token, team, "tool.task.list.invoke")
    await asyncio.sleep(0.2)
    message = assistant(tool_call("task-list", {}), tool_call("task-create", {"title": "first"}),
                        tool_call("task-list", {}), tool_call("task-create", {"title": "second"}),
                        tool_call("task-list", {}))
    status, body = await post_calls(client, tok, message)
    before, created1, middle, created2, after = contents(body)
    assert before["count"] == 0 and middle["count"] == 1 and after["count"] == 2
    assert [t["title"] for t in after["tasks"]] == ["first", "second"] or \
        sorted(t["title"] for t in after["tasks"]) == ["first", "second"]


async def test_approval_then_resume_through_the_surface(client, token, team) -> None:
    await grant(client, token, team, "tool.testsvc.guarded.invoke")
    await asyncio.sleep(0.2)
    tok = token(agent="oa-buyer", team=team)
    listed = (await (await client.get("/v1/openai/tools", headers=bearer(tok))).json())["tools"]
    assert RESUME_TOOL in {t["function"]["name"] for t in listed}
    status, body = await post_calls(client, tok, assistant(tool_call("testsvc-guarded", {"amount": 3})))
    (held,) = contents(body)
    assert held["status"] == "AUTHORIZATION_REQUIRED" and held["approval_id"]
    assert RESUME_TOOL in held["explanation"] and held["call_id"] in held["explanation"]
    gov = token(agent="gov", team=team, role="governance")
    r = await client.post(f"/v1/approvals/{held['approval_id']}/decision",
                          json={"decision": "approve"}, headers=bearer(gov))
    assert r.status == 200
    resume = tool_call(RESUME_TOOL, {"call_id": held["call_id"]})
    status, body = await post_calls(client, tok, assistant(resume))
    assert contents(body) == [{"done": 3}]
    assert body["results"][0]["body"]["call_id"] == held["call_id"]


async def test_bounds_and_shape(client, token, team) -> None:
    tok = token(team=team)
    many = assistant(*(tool_call("math", {"expr": "1"}) for _ in range(MAX_TOOL_CALLS + 1)))
    assert (await post_calls(client, tok, many))[0] == 400
    dup = assistant(tool_call("math", {"expr": "1"}, "same"), tool_call("math", {"expr": "2"}, "same"))
    status, body = await post_calls(client, tok, dup)
    assert status == 400 and "unique" in body["error"]["message"]
    huge = assistant(tool_call("text", {"op": "upper", "text": "x" * MAX_ARGUMENTS_BYTES}))
    assert (await post_calls(client, tok, huge))[0] in (400, 413)
    r = await client.post("/v1/openai/tool_calls", json={"tool_calls": []}, headers=bearer(tok))
    assert r.status == 400
    custom = {"tool_calls": [{"id": "x", "type": "custom", "custom": {"name": "math", "input": "1"}}]}
    r = await client.post("/v1/openai/tool_calls", json=custom, headers=bearer(tok))
    assert r.status == 400
    status, body = await post_calls(client, tok, assistant(tool_call("math", {"expr": "1"})),
                                    context={"team_id": "someone-else"})
    assert status == 200 and contents(body)[0]["error"]["reasons"] == ["team_mismatch"]
    r = await client.get("/v1/openai/tools")
    assert r.status == 401
