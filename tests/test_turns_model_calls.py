"""The model agent's own model calls are llm.chat calls of the turn's agent through the pipeline:
in usage and in the decision log under that agent and the turn's run, counted in the run's
budget; denied without the team's grant, paused for an approval a team rule requires, slowed
(not failed) by the agent's rate limit."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from tests.support.calls import bearer
from tests.support.fake_llm import FakeLLM, call, say, scripted
from tests.support.turn_helpers import (
    allow_model,
    decide,
    get_turn,
    model_client,
    resume_turn,
    start_turn,
)

AGENT = "model-agent"


@pytest.fixture
async def client(aiohttp_client, settings, builtin) -> Any:
    return await model_client(aiohttp_client, settings, tools=("math",))


async def until(read: Any, done: Any, timeout: float = 10.0) -> Any:
    """`read()` until `done(value)`: records are written off the request path."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await read()
        if done(value) or loop.time() > deadline:
            return value
        await asyncio.sleep(0.05)


async def test_model_calls_are_in_usage_decisions_and_the_run_budget(
        client, token, team, db_pool, llm_upstream: FakeLLM) -> None:
    llm_upstream.play(scripted(call(("math", {"expr": "2+3"}, "c_math")), say("5.")))
    tok = token(agent=AGENT, team=team)
    await allow_model(client, token, team, tok)
    r = await client.post("/v1/runs", json={"run_id": "budgeted", "budget": {
        "max_calls": 10, "max_tokens": 1000}}, headers=bearer(tok))
    assert r.status == 201
    status, done = await start_turn(client, tok, "What is 2+3?", agent="model", run_id="budgeted")
    assert status == 201 and done["status"] == "COMPLETED", done
    assert done["tokens_used"] == 30 and done["calls_made"] == 1  # the turn's tool calls: math

    # The turn's agent steps name the model calls they read.
    _, view = await get_turn(client, tok, done["turn_id"])
    model_calls = [s["call_id"] for s in view["steps"] if s["kind"] == "agent"]
    assert len(model_calls) == 2 and all(model_calls)

    # Usage: one row per model call, under the turn's agent and run, with the model's tokens.
    rows = await until(lambda: db_pool.fetch(
        "SELECT * FROM usage_records WHERE team_id = $1 AND tool = 'llm.chat'", team),
        lambda rows: len(rows) >= 2)
    assert sorted(str(r["call_id"]) for r in rows) == sorted(model_calls)
    for row in rows:
        assert (row["agent_id"], row["agent_run_id"], row["status"], row["decision"]) == (
            AGENT, "budgeted", "COMPLETED", "allow")
        assert row["tokens_used"] == 15 and row["category"] == "C"
    usage = await (await client.get("/v1/usage", headers=bearer(tok))).json()
    [by_tool] = [t for t in usage["by_tool"] if t["tool"] == "llm.chat"]
    assert by_tool["calls"] == 2 and by_tool["tokens_used"] == 30

    # The decision log: each model call decided, for the turn's agent.
    gov = token(agent="gov", team=team, role="governance")
    decisions = await until(
        lambda: _decisions(client, gov, tool="llm.chat", phase="call"), lambda d: len(d) >= 2)
    assert sorted(d["call_id"] for d in decisions) == sorted(model_calls)
    for d in decisions:
        assert d["result"] == "allow" and d["reasons"] == ["granted"]
        assert d["input"]["subject"]["agent_id"] == AGENT

    # The run's budget counted them like any call: 2 model calls and the tool call, 30 tokens.
    run = await until(lambda: _run(client, tok, "budgeted"), lambda run: run["used"]["tokens"] >= 30)
    assert run["used"] == {"calls": 3, "tokens": 30, "cost_1t": pytest.approx(30 * 0.000002 + 0.00002)}
    # A model call is the run's, not one of the turn's tool calls (no turn id, no tool events).
    turn_ids = await db_pool.fetch("SELECT turn_id FROM calls WHERE call_id = ANY($1::uuid[])",
                                   [uuid.UUID(c) for c in model_calls])
    assert [r["turn_id"] for r in turn_ids] == [None, None]


async def test_without_the_grant_the_turn_ends_denied(client, token, team,
                                                      llm_upstream: FakeLLM) -> None:
    tok = token(agent=AGENT, team=team)
    status, done = await start_turn(client, tok, "Hello?", agent="model")
    assert status == 201 and done["status"] == "FAILED", done
    assert done["error"]["code"] == "denied" and "llm.chat" in done["error"]["message"]
    assert llm_upstream.requests == []  # no token was spent
    gov = token(agent="gov", team=team, role="governance")
    [denied] = await until(lambda: _decisions(client, gov, tool="llm.chat", result="deny", phase="call"), bool)
    assert denied["reasons"] == ["grant_required"] and denied["input"]["subject"]["agent_id"] == AGENT


async def test_a_model_call_held_for_approval_pauses_the_turn(client, token, team,
                                                              llm_upstream: FakeLLM) -> None:
    llm_upstream.play(scripted(say("Approved answer.")))
    tok = token(agent=AGENT, team=team)
    await allow_model(client, token, team, tok)
    gov = token(agent="gov", team=team, role="governance")
    r = await client.post("/v1/admin/team-rules", headers=bearer(gov), json={
        "team_id": team, "tool": "llm.chat", "require_approval": True, "reason": "review prompts"})
    assert r.status == 201, await r.text()  # applied here before it answers
    status, held = await start_turn(client, tok, "Hello?", agent="model")
    assert status == 201 and held["status"] == "AUTHORIZATION_REQUIRED", held
    [auth] = held["authorization"]
    assert auth["tool"] == "llm.chat" and "tool_call_id" not in auth
    assert llm_upstream.requests == []

    await decide(client, token, team, auth["approval_id"])
    status, done = await resume_turn(client, tok, held["turn_id"])
    assert status == 200 and done["status"] == "COMPLETED", done
    assert done["result"]["answer"] == "Approved answer." and done["tokens_used"] == 15
    assert len(llm_upstream.requests) == 1  # the approved call, exactly once


async def test_the_agents_rate_limit_slows_the_turn_down(client, token, team, db_pool,
                                                         llm_upstream: FakeLLM) -> None:
    llm_upstream.play(scripted(call(("math", {"expr": "1"})), call(("math", {"expr": "2"})),
                               say("done")))
    tok = token(agent=AGENT, team=team)
    await allow_model(client, token, team, tok)
    gov = token(agent="gov", team=team, role="governance")
    r = await client.post("/v1/admin/team-rules", headers=bearer(gov), json={
        "team_id": team, "tool": "llm.chat", "rate_per_minute": 20})  # a burst of 2, then 3 s apart
    assert r.status == 201, await r.text()
    status, done = await start_turn(client, tok, "Count", agent="model")
    assert status == 201 and done["status"] == "COMPLETED", done
    assert len(llm_upstream.requests) == 3
    _, view = await get_turn(client, tok, done["turn_id"])
    waits = [s for s in view["steps"] if s["kind"] == "agent" and "retry_in_s" in s]
    assert waits and waits[0]["code"] == "rate_limited" and waits[0]["retry_in_s"] > 0
    rows = await until(lambda: db_pool.fetch(
        "SELECT error_code FROM usage_records WHERE team_id = $1 AND tool = 'llm.chat'", team),
        lambda rows: len(rows) >= 3 + len(waits))
    assert sorted(r["error_code"] or "" for r in rows).count("rate_limited") == len(waits)


async def _decisions(client: Any, tok: str, **params: str) -> list[dict]:
    r = await client.get("/v1/admin/decisions", params=params, headers=bearer(tok))
    assert r.status == 200, await r.text()
    return (await r.json())["decisions"]


async def _run(client: Any, tok: str, run_id: str) -> dict:
    return await (await client.get(f"/v1/runs/{run_id}", headers=bearer(tok))).json()

