"""Turns with the model agent, whose steps are llm.chat calls against the scripted
OpenAI-compatible server on loopback (tests/support/fake_llm.py): tools are exactly
GET /v1/openai/tools, tool calls run through the tool_calls path, held calls pause the turn,
token usage reaches the run, and bad model output never crashes the turn. The turn's agent is
granted llm.chat (category C) by its team, as any agent spending model tokens."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from infra.embedded.ports import free_port
from tests.support.calls import bearer, grant
from tests.support.fake_llm import FakeLLM, Step, call, say, scripted
from tests.support.llm_service import llm_settings
from tests.support.loopback import serve
from tests.support.settings import TEST_LLM_KEY
from tests.support.turn_helpers import (
    allow_model,
    decide,
    get_turn,
    granted,
    model_client,
    resume_turn,
    start_turn,
    turn_calls,
    turn_events,
)

API_KEY = TEST_LLM_KEY  # the upstream's key: llm.chat's (TOOLPROXY_LLM_API_KEY)


@pytest.fixture
def model_app(aiohttp_client, settings, builtin, token, team) -> Callable[..., Any]:
    """An app whose model agent is served (by the session's llm service unless a test serves
    another); the team grants its agents llm.chat."""
    allowed = False

    async def make(**overrides: Any) -> Any:
        nonlocal allowed
        client = await model_client(aiohttp_client, settings,
                                    tools=("math", "task.list", "greenfood.order"), **overrides)
        if not allowed:
            await allow_model(client, token, team, token(team=team))
            allowed = True
        return client
    return make


async def run_used(client: Any, tok: str, run_id: str, *, tokens: int, timeout: float = 5.0) -> dict:
    """The run, once its calls' rows hold `tokens` (the model's calls are written off the
    request path, like any call's)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        run = await (await client.get(f"/v1/runs/{run_id}", headers=bearer(tok))).json()
        if run["used"]["tokens"] >= tokens or loop.time() > deadline:
            return run
        await asyncio.sleep(0.05)


def tool_messages(request: dict) -> dict[str, Any]:
    """tool_call_id -> decoded content of each tool message the model was sent."""
    return {m["tool_call_id"]: orjson.loads(m["content"]) for m in request["messages"]
            if m["role"] == "tool"}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_the_model_uses_the_callers_tools_and_answers(model_app, token, team, db_pool,
                                                            llm_upstream, llm_served,
                                                            stream: bool) -> None:
    script = scripted(call(("math", {"expr": "2+3"}, "c_math"), ("testsvc-echo", {"say": "hi"}, "c_echo"),
                           content="Let me compute that."),
                      say("2+3 is 5."))
    fake = llm_upstream.play(script)
    if stream:  # TOOLPROXY_LLM_STREAM=true on the services
        await llm_served.serve(llm_settings(fake.base_url, stream=True))
    client = await model_app(turn_model="medium")
    tok = token(agent="model-agent", team=team)
    status, done = await start_turn(client, tok, "What is 2+3?", agent="model", run_id="m-run")
    assert status == 201, done
    assert done["status"] == "COMPLETED"
    assert done["result"]["answer"] == "2+3 is 5."
    assert done["tokens_used"] == 30 and done["calls_made"] == 2

    assert len(fake.requests) == 2
    first, second = fake.requests
    assert bool(first.get("stream")) is stream
    listing = await (await client.get("/v1/openai/tools", headers=bearer(tok))).json()
    assert first["tools"] == listing["tools"]  # exactly the caller's callable catalog
    assert first["model"] == "medium"  # TOOLPROXY_TURN_MODEL
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    answers = tool_messages(second)
    assert answers["c_math"] == {"value": 5}
    assert answers["c_echo"]["said"] == "hi" and answers["c_echo"]["run_id"] == "m-run"
    assert fake.headers[0]["Authorization"] == f"Bearer {API_KEY}"

    run = await run_used(client, tok, "m-run", tokens=30)
    assert run["used"]["tokens"] == 30  # the model's usage is counted to the run
    calls = await turn_calls(db_pool, done["turn_id"], 2)
    assert answers["c_echo"]["call_id"] in calls  # the call the tool saw is the turn's

    events = await turn_events(client, tok, done["turn_id"])
    types = [e["type"] for e in events]
    assert types[0] == "agent.turn.started" and types[-1] == "agent.turn.completed"
    assert "agent.plan.updated" in types and types.count("agent.tool.completed") == 2
    _, view = await get_turn(client, tok, done["turn_id"])
    assert [s["kind"] for s in view["steps"]] == [
        "user", "agent", "tool_request", "tool_request", "tool_result", "tool_result",
        "agent", "result"]
    assert API_KEY not in orjson.dumps(view).decode()
    assert API_KEY not in orjson.dumps(events).decode()


async def test_a_held_call_pauses_the_model_until_resume_on_any_replica(
    model_app, token, team, db_pool, llm_upstream
) -> None:
    script = scripted(call(("greenfood-order", {"op": "create_order", "product_id": "milk", "qty": 1},
                            "c_order")),
                      say("Ordered one milk."))
    fake = llm_upstream.play(script)
    a = await model_app()
    b = await model_app()
    await grant(a, token, team, "tool.greenfood.order.invoke")
    tok = token(agent="model-agent", team=team)
    await granted(a, tok, {"greenfood.order"})
    status, held = await start_turn(a, tok, "Order a milk", agent="model")
    assert status == 201 and held["status"] == "AUTHORIZATION_REQUIRED", held
    assert len(fake.requests) == 1
    assert fake.requests[0]["model"] == "small"  # no TOOLPROXY_TURN_MODEL: llm.chat's first
    [auth] = held["authorization"]
    assert auth["tool_call_id"] == "c_order"

    status, pending = await resume_turn(b, tok, held["turn_id"])
    assert status == 202 and len(fake.requests) == 1  # nothing decided, nothing asked

    await decide(a, token, team, auth["approval_id"])
    status, done = await resume_turn(b, tok, held["turn_id"])
    assert status == 200 and done["status"] == "COMPLETED", done
    assert done["result"]["answer"] == "Ordered one milk."
    order = tool_messages(fake.requests[1])["c_order"]
    assert order["status"] == "created" and order["product_id"] == "milk"
    assert await db_pool.fetchval("SELECT count(*) FROM greenfood_orders WHERE team_id = $1", team) == 1
    row = await db_pool.fetchrow("SELECT turn_id, status FROM calls WHERE call_id = $1",
                                 uuid.UUID(auth["call_id"]))
    assert str(row["turn_id"]) == held["turn_id"] and row["status"] == "COMPLETED"


async def test_bad_tool_calls_become_messages_and_errors_never_crashes(model_app, token, team,
                                                                      llm_upstream) -> None:
    script = scripted(
        call(("no-such-tool", {}, "c_unknown"), ("math", "{not json", "c_badjson"),
             ("task-create", {"title": "x"}, "c_denied"), ("math", {"expr": "1+1"}, "c_first"),
             ("math", {"expr": "1+1"}, "c_again"), ("Bad.Name", {}, "c_badname")),
        call(("math", {"expr": "1+1"}, "c_later")),
        say("Done, despite the errors."))
    fake = llm_upstream.play(script)
    client = await model_app()
    tok = token(agent="model-agent", team=team)
    status, done = await start_turn(client, tok, "Try things", agent="model")
    assert status == 201 and done["status"] == "COMPLETED", done
    seen = tool_messages(fake.requests[1])
    assert seen["c_unknown"]["error"]["code"] == "unknown_tool"
    assert seen["c_badjson"]["error"]["code"] == "invalid_args"
    assert seen["c_denied"]["status"] == "DENIED" and seen["c_denied"]["error"]["code"] == "denied"
    assert seen["c_first"] == {"value": 2}
    assert seen["c_again"]["error"]["code"] == "duplicate_call"
    assert seen["c_badname"]["error"]["code"] == "invalid_request"
    assert tool_messages(fake.requests[2])["c_later"]["error"]["code"] == "duplicate_call"
    assert done["calls_made"] == 7  # every call asked for counts, run or not

    events = await turn_events(client, tok, done["turn_id"])
    codes = [e["payload"].get("code") for e in events if e["type"] == "agent.error"]
    assert sorted(codes) == sorted(["unknown_tool", "invalid_args", "denied", "duplicate_call",
                                    "invalid_request", "duplicate_call"])


@pytest.mark.parametrize("same", [False, True], ids=["new-calls", "same-call"])
async def test_a_model_that_never_stops_reaches_the_call_bound(model_app, token, team, llm_upstream,
                                                             same: bool) -> None:
    def forever(_request: dict, n: int) -> Step:
        return call(("math", {"expr": "1+1" if same else f"{n}+1"}))

    fake = llm_upstream.play(forever)
    client = await model_app(turn_max_calls=4)
    tok = token(agent="model-agent", team=team)
    status, done = await start_turn(client, tok, "Loop", agent="model")
    assert status == 201 and done["status"] == "FAILED"
    assert done["error"]["code"] == "call_limit_reached" and done["calls_made"] == 4
    assert len(fake.requests) == 5
    events = await turn_events(client, tok, done["turn_id"])
    assert events[-1]["type"] == "agent.turn.completed"
    assert events[-1]["payload"]["code"] == "call_limit_reached"


async def test_an_upstream_that_is_down_fails_the_turn(model_app, token, team, llm_served) -> None:
    await llm_served.serve(llm_settings(f"http://127.0.0.1:{free_port()}/v1"))
    client = await model_app()
    tok = token(agent="model-agent", team=team)
    status, done = await start_turn(client, tok, "Hello?", agent="model")
    assert status == 201 and done["status"] == "FAILED"
    assert done["error"]["code"] == "upstream_unavailable"
    events = await turn_events(client, tok, done["turn_id"])
    assert [e["type"] for e in events] == ["agent.turn.started", "agent.error", "agent.turn.completed"]
    assert API_KEY not in orjson.dumps(done).decode()


@pytest.mark.parametrize(("http_status", "code"), [(500, "upstream_unavailable"),
                                                   (429, "upstream_unavailable"),
                                                   (400, "upstream_error"),
                                                   (401, "upstream_error")])
async def test_upstream_errors_end_the_turn_with_a_code(model_app, token, team, llm_upstream,
                                                       http_status, code) -> None:
    llm_upstream.play(scripted(Step(status=http_status)))
    client = await model_app()
    status, done = await start_turn(client, token(team=team), "Hello?", agent="model")
    assert status == 201 and done["status"] == "FAILED" and done["error"]["code"] == code


async def test_a_redirecting_upstream_is_not_followed(model_app, token, team, llm_served) -> None:
    """The key and the turn's messages go to the configured address only: a redirect (to a
    model that would answer) ends the turn `upstream_error`, and the target sees nothing."""
    from aiohttp import web

    async with FakeLLM(TEST_LLM_KEY) as target:
        target.play(scripted(say("followed")))

        async def redirect(_request: web.Request) -> web.Response:
            raise web.HTTPTemporaryRedirect(f"{target.base_url}/chat/completions")

        app = web.Application()
        app.router.add_post("/v1/chat/completions", redirect)
        runner, port = await serve(app)
        try:
            await llm_served.serve(llm_settings(f"http://127.0.0.1:{port}/v1"))
            client = await model_app()
            status, done = await start_turn(client, token(team=team), "Hello?", agent="model")
        finally:
            await runner.cleanup()
        assert status == 201 and done["status"] == "FAILED"
        assert done["error"]["code"] == "upstream_error"
        assert target.requests == []


async def test_the_run_token_budget_stops_the_model(model_app, token, team, llm_upstream) -> None:
    fake = llm_upstream.play(scripted(call(("math", {"expr": "1"})), call(("math", {"expr": "2"})),
                                      say("never reached")))
    client = await model_app()
    tok = token(agent="model-agent", team=team)
    r = await client.post("/v1/runs", json={"run_id": "small", "budget": {"max_tokens": 20}},
                          headers=bearer(tok))
    assert r.status == 201
    status, done = await start_turn(client, tok, "Count", agent="model", run_id="small")
    assert done["status"] == "FAILED" and done["error"]["code"] == "run_budget_exceeded"
    assert len(fake.requests) == 2 and done["tokens_used"] == 30


async def test_model_text_with_nul_characters_is_kept_without_them(model_app, token, team,
                                                                  llm_upstream) -> None:
    llm_upstream.play(scripted(say("a\u0000b")))
    client = await model_app()
    tok = token(team=team)
    status, done = await start_turn(client, tok, "Say it", agent="model")
    assert status == 201 and done["status"] == "COMPLETED"
    _, view = await get_turn(client, tok, done["turn_id"])
    assert view["result"]["answer"] == "a\ufffdb"


def test_the_model_key_is_redacted_from_the_settings() -> None:
    s = llm_settings("http://127.0.0.1:1/v1")  # the model agent's key is llm.chat's
    assert API_KEY not in orjson.dumps(s.redacted()).decode()
    assert s.redacted()["api_key"] == "***"


def test_the_retired_model_settings_refuse_to_start(settings, monkeypatch) -> None:
    """TOOLPROXY_MODEL_* would otherwise be ignored, and the model agent ask another endpoint
    than the operator configured: the proxy does not start, and says what replaced them."""
    monkeypatch.setenv("TOOLPROXY_MODEL_BASE_URL", "http://127.0.0.1:11434/v1")
    with pytest.raises(ValueError, match="TOOLPROXY_MODEL_BASE_URL: retired.*TOOLPROXY_LLM_BASE_URL"):
        type(settings)(**settings.model_dump())
