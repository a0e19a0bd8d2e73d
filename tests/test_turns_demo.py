"""Turns with the deterministic demo agent: the whole USER -> ... -> RESULT path through the real
pipeline (policy, approvals, usage), durable across replicas, isolated per team."""

from __future__ import annotations

import asyncio
import uuid

import orjson
import pytest

from proxy.web import keys as appkeys
from proxy.web.app import create_app
from proxy.records.events import TOOL_EVENTS, TYPES
from tests.support.calls import bearer, grant, invoke
from tests.support.turn_helpers import (
    decide,
    get_turn,
    granted,
    normalized,
    resume_turn,
    start_turn,
    turn_calls,
    turn_events,
)

ORDER = "Please order 2 apples for the team kitchen"


async def _team_ready(client, token, team: str, tasks: int = 1) -> str:
    """Grants the demo needs, and some state to read; returns the agent's token."""
    tok = token(agent="demo-agent", team=team)
    for tool in ("task.list", "task.create", "search.lite", "greenfood.order"):
        # one at a time: each grant's cache reload done before the next grant's begins
        await grant(client, token, team, f"tool.{tool}.invoke")
        await granted(client, tok, {tool})
    for i in range(tasks):
        status, _ = await invoke(client, tok, "task.create", {"title": f"task {i}"})
        assert status == 200
    return tok


def kinds(view: dict) -> list[str]:
    return [s["kind"] for s in view["steps"]]


async def test_demo_turn_holds_for_approval_then_publishes_the_result(client, token, team, db_pool) -> None:
    tok = await _team_ready(client, token, team)
    status, started = await start_turn(client, tok, ORDER)
    assert status == 201, started
    assert started["status"] == "AUTHORIZATION_REQUIRED"
    turn_id, run_id = started["turn_id"], started["run_id"]
    [held] = started["authorization"]
    assert held["tool"] == "greenfood.order" and held["approval_id"]

    status, view = await get_turn(client, tok, turn_id)
    assert status == 200
    assert kinds(view) == ["user", "agent", "plan",
                           "tool_request", "tool_result",                      # task.list
                           "tool_request", "tool_result",                      # search.lite
                           "tool_request", "authorization_required", "agent",  # inventory, withdrawn
                           "plan", "tool_request", "authorization_required"]   # create_order
    plan = view["steps"][10]["plan"]
    assert plan["order"] == {"product_id": "apple", "qty": 2}
    assert plan["observed"][0] == "1 open of 1 tasks"
    assert view["steps"][-1]["call_id"] == held["call_id"]
    # results are referenced, not copied: the task list's step names its call, not its tasks
    assert "output" not in view["steps"][4] and view["steps"][4]["call_id"]

    # Before the human decision a resume changes nothing, and nothing ran.
    status, again = await resume_turn(client, tok, turn_id)
    assert status == 202 and again["status"] == "AUTHORIZATION_REQUIRED"
    r = await client.get(f"/v1/calls/{held['call_id']}", headers=bearer(tok))
    call = await r.json()
    assert call["status"] == "AUTHORIZATION_REQUIRED" and call["turn_id"] == turn_id

    await decide(client, token, team, held["approval_id"])
    status, done = await resume_turn(client, tok, turn_id)
    assert status == 200, done
    assert done["status"] == "COMPLETED"
    order = done["result"]["order"]
    assert order["status"] == "COMPLETED" and order["product_id"] == "apple" and order["qty"] == 2
    assert done["result"]["summary"] == "ordered 2 x apple"
    assert done["result"]["after"]["tasks"]["count"] == 1
    assert await db_pool.fetchval("SELECT count(*) FROM greenfood_orders WHERE team_id = $1", team) == 1

    _, view = await get_turn(client, tok, turn_id)
    assert kinds(view)[13:] == ["tool_result", "tool_request", "tool_result", "tool_request",
                                "tool_result", "tool_request", "authorization_required", "agent",
                                "result"]
    assert view["calls_made"] == 7 and view["finished_at"]  # the resumed order is the same call

    # Every call it made carries the turn, and is on the run (rows follow the journal).
    assert len(await turn_calls(db_pool, turn_id, 7)) == 7
    rows = await db_pool.fetch("SELECT tool, status, agent_run_id FROM calls WHERE turn_id = $1",
                               uuid.UUID(turn_id))
    assert len(rows) == 7 and {r["agent_run_id"] for r in rows} == {run_id}
    r = await client.get(f"/v1/runs/{run_id}", headers=bearer(tok))
    run = await r.json()
    assert run["totals"]["calls"] == 7
    assert run["plan"] == plan  # the turn's plan is its run's

    events = await turn_events(client, tok, turn_id)
    types = [e["type"] for e in events]
    assert types[0] == "agent.turn.started" and types[-1] == "agent.turn.completed"
    assert set(types) == set(TYPES) - {"agent.error", *TOOL_EVENTS}  # every lifecycle event
    assert [e["sequence"] for e in events] == sorted(e["sequence"] for e in events)
    for e in events:
        assert e["turn_id"] == turn_id and e["run_id"] == run_id and e["time"]
        if e["type"].startswith("agent.tool.") or e["type"] == "agent.authorization.required":
            assert e["call_id"]
    assert events[-1]["payload"]["status"] == "COMPLETED"

    status, body = await resume_turn(client, tok, turn_id)
    assert status == 409 and body["error"]["code"] == "turn_not_held"


async def _demo_events(client, token, team: str, db_pool) -> tuple[list, list]:
    tok = await _team_ready(client, token, team, tasks=2)
    _, started = await start_turn(client, tok, ORDER, run_id="kitchen-run")
    await decide(client, token, team, started["authorization"][0]["approval_id"])
    _, done = await resume_turn(client, tok, started["turn_id"])
    assert done["status"] == "COMPLETED"
    events = await turn_events(client, tok, started["turn_id"])
    _, view = await get_turn(client, tok, started["turn_id"])
    return ([normalized({**e, "run_id": None}) for e in events],
            [normalized(s) for s in view["steps"]])


async def test_same_input_same_events_and_steps(client, token, db_pool) -> None:
    team_a, team_b = f"t_{uuid.uuid4().hex[:10]}", f"t_{uuid.uuid4().hex[:10]}"
    events_a, steps_a = await _demo_events(client, token, team_a, db_pool)
    events_b, steps_b = await _demo_events(client, token, team_b, db_pool)
    assert len(events_a) > 10
    assert events_a == events_b
    assert steps_a == steps_b


async def test_governance_denial_ends_the_order_not_the_turn(client, token, team, db_pool) -> None:
    tok = await _team_ready(client, token, team)
    _, started = await start_turn(client, tok, "order 3 bread")
    await decide(client, token, team, started["authorization"][0]["approval_id"], "deny")
    status, done = await resume_turn(client, tok, started["turn_id"])
    assert status == 200 and done["status"] == "COMPLETED"
    assert done["result"]["order"]["status"] == "DENIED"
    assert done["result"]["summary"] == "the order of 3 x bread was not placed (denied)"
    assert await db_pool.fetchval("SELECT count(*) FROM greenfood_orders WHERE team_id = $1", team) == 0


async def test_without_grants_the_policy_refuses_and_the_turn_reports_it(client, token, team) -> None:
    tok = token(agent="nogrant", team=team)
    status, done = await start_turn(client, tok, ORDER)
    assert status == 201 and done["status"] == "COMPLETED"
    assert done["result"]["before"]["tasks"] == {"status": "DENIED", "code": "denied",
                                                 "call_id": done["result"]["before"]["tasks"]["call_id"]}
    assert done["result"]["order"]["status"] == "DENIED"
    events = await turn_events(client, tok, done["turn_id"])
    assert "agent.error" in [e["type"] for e in events]  # each denial is an agent.error


async def test_the_call_bound_ends_the_turn(aiohttp_client, settings, builtin, token, team) -> None:
    app = create_app(settings.model_copy(update={"turn_max_calls": 2}))
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(["task.list", "greenfood.order"], timeout=10)
    tok = await _team_ready(client, token, team)
    status, done = await start_turn(client, tok, ORDER)
    assert status == 201 and done["status"] == "FAILED"
    assert done["error"]["code"] == "call_limit_reached" and done["calls_made"] == 2
    events = await turn_events(client, tok, done["turn_id"])
    errors = [e for e in events if e["type"] == "agent.error"]
    assert errors[-1]["payload"]["code"] == "call_limit_reached"


async def test_a_held_turn_is_resumed_on_another_replica_after_a_restart(
    aiohttp_client, settings, builtin, token, team
) -> None:
    first = create_app(settings)
    a = await aiohttp_client(first)
    await first[appkeys.CATALOG].wait_available(["task.list", "greenfood.order"], timeout=10)
    tok = await _team_ready(a, token, team)
    _, started = await start_turn(a, tok, ORDER)
    assert started["status"] == "AUTHORIZATION_REQUIRED"
    await a.close()  # the replica that ran it is gone

    second = create_app(settings)
    b = await aiohttp_client(second)
    await second[appkeys.CATALOG].wait_available(["task.list", "greenfood.order"], timeout=10)
    await decide(b, token, team, started["authorization"][0]["approval_id"])
    status, done = await resume_turn(b, tok, started["turn_id"])
    assert status == 200 and done["status"] == "COMPLETED"
    assert done["result"]["order"]["status"] == "COMPLETED"


async def test_turns_are_private_to_their_team_and_agent(client, token, team) -> None:
    tok = await _team_ready(client, token, team)
    _, started = await start_turn(client, tok, ORDER)
    turn_id = started["turn_id"]
    outsider = token(agent="demo-agent", team=f"t_{uuid.uuid4().hex[:10]}")
    teammate = token(agent="someone-else", team=team)
    assert (await get_turn(client, outsider, turn_id))[0] == 404
    assert (await resume_turn(client, outsider, turn_id))[0] == 404
    assert (await resume_turn(client, teammate, turn_id))[0] == 404
    r = await client.post(f"/v1/turns/{turn_id}/cancel", headers=bearer(outsider))
    assert r.status == 404
    r = await client.post(f"/v1/turns/{turn_id}/cancel", headers=bearer(teammate))
    assert r.status == 403
    assert (await get_turn(client, teammate, turn_id))[0] == 200  # the team may read it
    assert (await get_turn(client, tok, "not-a-uuid"))[0] == 404
    # another agent's run is not yours to add turns to
    status, body = await start_turn(client, teammate, ORDER, run_id=started["run_id"])
    assert status == 403 and body["error"]["code"] == "forbidden"


async def test_cancelling_a_held_turn_withdraws_its_call(client, token, team) -> None:
    tok = await _team_ready(client, token, team)
    _, started = await start_turn(client, tok, ORDER)
    held = started["authorization"][0]
    r = await client.post(f"/v1/turns/{started['turn_id']}/cancel", headers=bearer(tok))
    assert r.status == 200
    assert (await r.json())["status"] == "CANCELLED"
    call = await (await client.get(f"/v1/calls/{held['call_id']}", headers=bearer(tok))).json()
    assert call["status"] == "CANCELLED"
    status, body = await resume_turn(client, tok, started["turn_id"])
    assert status == 409 and body["error"]["code"] == "turn_not_held"
    r = await client.post(f"/v1/turns/{started['turn_id']}/cancel", headers=bearer(tok))
    assert r.status == 409 and (await r.json())["error"]["code"] == "turn_not_running"
    events = await turn_events(client, tok, started["turn_id"])
    assert events[-1]["type"] == "agent.turn.completed"
    assert events[-1]["payload"]["status"] == "CANCELLED"


async def test_a_completed_run_takes_no_more_turns(client, token, team) -> None:
    tok = token(agent="demo-agent", team=team)
    r = await client.post("/v1/runs", json={"run_id": "done-run"}, headers=bearer(tok))
    assert r.status == 201
    r = await client.post("/v1/runs/done-run/complete", headers=bearer(tok))
    assert r.status == 200
    status, body = await start_turn(client, tok, ORDER, run_id="done-run")
    assert status == 409 and body["error"]["code"] == "run_completed"


@pytest.mark.parametrize("body", [
    {"input": "x"},
    {"input": "x", "agent": "other"},
    {"agent": "demo"},
    {"input": "", "agent": "demo"},
    {"input": "x" * 8001, "agent": "demo"},
    {"input": "a\u0000b", "agent": "demo"},
    {"input": "x", "agent": "demo", "extra": 1},
    {"input": "x", "agent": "demo", "run_id": "bad run id"},
    {"input": ["x"], "agent": "demo"},
])
async def test_bad_turn_requests_are_refused(client, token, team, body) -> None:
    r = await client.post("/v1/turns", json=body, headers=bearer(token(team=team)))
    assert r.status == 400
    assert (await r.json())["error"]["code"] == "invalid_request"


async def test_the_model_agent_needs_an_upstream(client, token, team, llm_served, monkeypatch) -> None:
    """Its steps are llm.chat calls: where llm.chat has no responder the turn cannot start — a
    passing outage is 503 (retry), a stack that never served llm.chat (no
    TOOLPROXY_LLM_BASE_URL) has no model agent: 400, which retrying cannot change."""
    await llm_served.serve(None)
    catalog = client.app[appkeys.CATALOG]
    for _ in range(200):  # the service's goodbye reaches the catalog
        if not catalog.available("llm.chat"):
            break
        await asyncio.sleep(0.02)
    status, body = await start_turn(client, token(team=team), "hello", agent="model")
    assert status == 503 and body["error"]["code"] == "tool_unavailable", body
    # A catalog that never heard of llm.chat: the stack offers no model agent.
    known = catalog.get
    monkeypatch.setattr(catalog, "get", lambda name: None if name == "llm.chat" else known(name))
    status, body = await start_turn(client, token(team=team), "hello", agent="model")
    assert status == 400 and body["error"]["code"] == "model_not_configured", body


async def test_unauthenticated_turns_are_refused(client) -> None:
    r = await client.post("/v1/turns", json={"input": "x", "agent": "demo"})
    assert r.status == 401


async def test_two_resumes_at_once_run_the_order_once(client, token, team, db_pool) -> None:
    tok = await _team_ready(client, token, team)
    _, started = await start_turn(client, tok, ORDER)
    await decide(client, token, team, started["authorization"][0]["approval_id"])
    (s1, b1), (s2, b2) = await asyncio.gather(resume_turn(client, tok, started["turn_id"]),
                                              resume_turn(client, tok, started["turn_id"]))
    assert sorted([s1, s2]) == [200, 409]
    winner = b1 if s1 == 200 else b2
    loser = b2 if s1 == 200 else b1
    assert winner["status"] == "COMPLETED" and loser["error"]["code"] == "turn_not_held"
    assert await db_pool.fetchval("SELECT count(*) FROM greenfood_orders WHERE team_id = $1", team) == 1


async def test_turn_events_stream_over_sse(client, token, team) -> None:
    tok = await _team_ready(client, token, team, tasks=0)
    _, started = await start_turn(client, tok, ORDER)
    events = await turn_events(client, tok, started["turn_id"], until="agent.authorization.required")
    seen: list[dict] = []
    async with client.get("/v1/events/stream?cursor=0", headers=bearer(tok)) as r:
        assert r.status == 200
        async for line in r.content:
            if line.startswith(b"data: "):
                e = orjson.loads(line[6:])
                if e["turn_id"] == started["turn_id"]:
                    seen.append(e)
                if len(seen) == len(events):
                    break
    assert [e["sequence"] for e in seen] == [e["sequence"] for e in events]
    assert seen[0]["type"] == "agent.turn.started"
