"""Turns that do not end on their own: answered while still running, cancelled mid-way, cut by
a stopping replica, or left RUNNING by a replica that died."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from proxy.web.api.keys import TURNS
from proxy.turns.models import Step, Turn
from proxy.turns.store import TurnStore
from tests.support.calls import bearer
from tests.support import fake_llm
from tests.support.turn_helpers import allow_model, get_turn, model_client, start_turn, turn_events


def _slow_forever(_request: dict, n: int) -> fake_llm.Step:
    return fake_llm.call(("math", {"expr": f"{n}+1"}))


async def _app(aiohttp_client, settings, token, team, **overrides):
    """The model agent's steps are llm.chat calls of the turn's agent: its team grants it."""
    client = await model_client(aiohttp_client, settings, tools=("math",), turn_wait_s=0.0,
                                turn_max_calls=100, **overrides)
    await allow_model(client, token, team, token(agent="m", team=team))
    return client.app, client


async def test_a_running_turn_answers_202_and_stops_on_cancel(aiohttp_client, settings, builtin,
                                                              token, team, llm_upstream) -> None:
    fake = llm_upstream.play(_slow_forever, latency_s=0.2)
    _, client = await _app(aiohttp_client, settings, token, team)
    tok = token(agent="m", team=team)
    status, started = await start_turn(client, tok, "count forever", agent="model")
    assert status == 202 and started["status"] == "RUNNING"
    r = await client.post(f"/v1/turns/{started['turn_id']}/cancel", headers=bearer(tok))
    assert r.status == 200
    body = await r.json()
    assert body["status"] == "CANCELLED" and body["error"]["code"] == "cancelled"
    asked = len(fake.requests)
    _, view = await get_turn(client, tok, started["turn_id"])
    assert view["status"] == "CANCELLED" and view["steps"][-1]["kind"] == "error"
    events = await turn_events(client, tok, started["turn_id"])
    assert events[-1]["payload"]["status"] == "CANCELLED"
    assert len(fake.requests) == asked  # it asked the model nothing more


async def test_a_stopping_replica_fails_its_running_turns(aiohttp_client, settings, builtin,
                                                          token, team, db_pool, llm_upstream) -> None:
    llm_upstream.play(_slow_forever, latency_s=5.0)
    _, client = await _app(aiohttp_client, settings, token, team)
    tok = token(agent="m", team=team)
    status, started = await start_turn(client, tok, "wait", agent="model")
    assert status == 202
    await client.close()
    row = await db_pool.fetchrow("SELECT status, error FROM turns WHERE turn_id = $1",
                                 uuid.UUID(started["turn_id"]))
    assert row["status"] == "FAILED" and row["error"]["code"] == "turn_interrupted"


async def test_turns_left_running_by_a_dead_replica_are_resolved(client, token, team, db_pool) -> None:
    store = TurnStore(db_pool)
    turn_id = str(uuid.uuid4())
    turn = Turn(turn_id=turn_id, team_id=team, agent_id="m", run_id="r1", agent="demo",
                status="RUNNING", input="x")
    await store.create(turn, "proxy-long-gone", [Step("user", datetime.now(timezone.utc), {"input": "x"})])
    await db_pool.execute("UPDATE turns SET updated_at = now() - interval '1 hour' WHERE turn_id = $1",
                          uuid.UUID(turn_id))
    runtime = client.app[TURNS]
    assert await runtime.resolve_lost() >= 1
    tok = token(agent="m", team=team)
    _, view = await get_turn(client, tok, turn_id)
    assert view["status"] == "FAILED" and view["error"]["code"] == "turn_interrupted"
    events = await turn_events(client, tok, turn_id)
    assert [e["type"] for e in events] == ["agent.error", "agent.turn.completed"]


async def test_a_held_turn_is_not_lost(client, token, team, db_pool) -> None:
    store = TurnStore(db_pool)
    turn_id = str(uuid.uuid4())
    await store.create(Turn(turn_id=turn_id, team_id=team, agent_id="m", run_id="r1", agent="demo",
                            status="RUNNING", input="x"), "proxy-long-gone",
                       [Step("user", datetime.now(timezone.utc))])
    await db_pool.execute("UPDATE turns SET status = 'AUTHORIZATION_REQUIRED', owner = NULL,"
                          " updated_at = now() - interval '1 hour' WHERE turn_id = $1",
                          uuid.UUID(turn_id))
    await client.app[TURNS].resolve_lost()
    assert await db_pool.fetchval("SELECT status FROM turns WHERE turn_id = $1",
                                  uuid.UUID(turn_id)) == "AUTHORIZATION_REQUIRED"
