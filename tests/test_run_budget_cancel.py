"""A run's budget counts exactly the calls that ran, and their cost exactly what usage
recorded, when a client disconnects mid-admission; a fixed price is charged with the count."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from proxy.core.run_budget import BUCKET as RUNS
from proxy.web import keys as appkeys
from proxy.web.admin import keys as admin_keys
from tests.support.calls import bearer, grant, invoke
from tests.support.waiting import until

MAX_CALLS = 3
PRICE = 0.00002  # `math`'s fixed price per call (services/math/manifests.py)


async def _none_settling(budgets: Any) -> bool:
    return not budgets._settling


async def _run(client, tok: str) -> str:
    r = await client.post("/v1/runs", headers=bearer(tok), json={"budget": {"max_calls": MAX_CALLS}})
    assert r.status == 201, await r.text()
    return (await r.json())["run_id"]


async def _disconnect_at(client, tok: str, run_id: str, reached: asyncio.Event) -> None:
    """Send a call of the run, and close the connection once it has reached `reached`."""
    url = str(client.make_url("/v1/tools/invoke"))
    session = aiohttp.ClientSession()
    sent = asyncio.ensure_future(session.post(url, headers=bearer(tok), json={
        "tool": "math", "args": {"expr": "6*7"}, "context": {"agent_run_id": run_id}}))
    try:
        await asyncio.wait_for(reached.wait(), 10)
    finally:
        sent.cancel()
        await asyncio.gather(sent, return_exceptions=True)
        await session.close()


async def _usage_cost(db_pool, run_id: str) -> float:
    return float(await db_pool.fetchval(
        "SELECT coalesce(sum(cost_1t), 0) FROM usage_records WHERE agent_run_id = $1", run_id))


async def _budget_matches_the_calls(client, tok: str, run_id: str, db_pool) -> None:
    """The run's counter against its calls on record: the two that completed, the one cancelled
    before it reached its tool (its price given back with its count); then a third call still
    fits (max_calls 3)."""
    async def settled() -> bool:
        r = await client.get(f"/v1/runs/{run_id}", headers=bearer(tok))
        run = await r.json()
        rows = await db_pool.fetch("SELECT status, started_at FROM calls WHERE agent_run_id = $1", run_id)
        return (run["used"]["calls"] == 2 and len(rows) == 3
                and run["used"]["cost_1t"] == pytest.approx(await _usage_cost(db_pool, run_id)))

    await until(settled)
    r = await client.get(f"/v1/runs/{run_id}", headers=bearer(tok))
    run = await r.json()
    rows = await db_pool.fetch("SELECT status, started_at FROM calls WHERE agent_run_id = $1", run_id)
    ran = [row for row in rows if row["started_at"] is not None]
    assert run["used"]["calls"] == len(ran) == 2
    assert run["used"]["cost_1t"] == pytest.approx(await _usage_cost(db_pool, run_id)) == pytest.approx(2 * PRICE)
    assert sorted(row["status"] for row in rows) == ["CANCELLED", "COMPLETED", "COMPLETED"]
    status, body = await invoke(client, tok, "math", {"expr": "1+1"}, context={"agent_run_id": run_id})
    assert status == 200, body


async def test_a_call_cancelled_after_its_count_gives_it_back(client, token, team, db_pool,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The client goes away while its call waits for the rate limits, after the run's budget
    counted it: the count is given back and the call recorded CANCELLED (it never ran)."""
    tok = token(agent="quitter", team=team)
    run_id = await _run(client, tok)
    for i in range(2):
        assert (await invoke(client, tok, "math", {"expr": f"{i}+1"},
                             context={"agent_run_id": run_id}))[0] == 200
    limiter = client.app[admin_keys.LIMITER]
    real_admit = limiter.admit
    reached = asyncio.Event()

    async def admit_held(**kw: Any) -> Any:
        reached.set()
        await asyncio.Event().wait()  # until the request is cancelled
        return await real_admit(**kw)

    monkeypatch.setattr(limiter, "admit", admit_held)
    await _disconnect_at(client, tok, run_id, reached)
    monkeypatch.setattr(limiter, "admit", real_admit)
    await _budget_matches_the_calls(client, tok, run_id, db_pool)


async def test_a_call_cancelled_while_its_count_is_on_its_way(client, token, team, db_pool,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The client goes away while the run's counter is being written: the write still lands
    (it was sent), and is given back once it has."""
    tok = token(agent="quitter", team=team)
    run_id = await _run(client, tok)
    for i in range(2):
        assert (await invoke(client, tok, "math", {"expr": f"{i}+1"},
                             context={"agent_run_id": run_id}))[0] == 200
    store = client.app[appkeys.PIPELINE].budgets._store
    real_apply = store._apply
    reached, go = asyncio.Event(), asyncio.Event()

    async def apply_held(key: str, steps: list[Any]) -> list[Any]:
        reached.set()
        await go.wait()
        return await real_apply(key, steps)

    monkeypatch.setattr(store, "_apply", apply_held)
    await _disconnect_at(client, tok, run_id, reached)

    async def recorded() -> bool:  # the handler saw its cancellation (the count still waits)
        return await db_pool.fetchval(
            "SELECT count(*) FROM calls WHERE agent_run_id = $1 AND status = 'CANCELLED'", run_id) == 1

    await until(recorded, 5.0)
    monkeypatch.setattr(store, "_apply", real_apply)
    go.set()
    await _budget_matches_the_calls(client, tok, run_id, db_pool)


async def test_a_fixed_price_is_charged_with_the_count(client, token, team, db_pool) -> None:
    """`math`'s price is charged to its run in the same write as its count: a run whose cost
    budget holds two calls refuses the third before it runs, and its cost is what usage
    recorded for the two."""
    tok = token(agent="spender", team=team)
    r = await client.post("/v1/runs", headers=bearer(tok), json={"budget": {"max_cost_1t": 2 * PRICE}})
    assert r.status == 201, await r.text()
    run_id = (await r.json())["run_id"]
    budgets = client.app[appkeys.PIPELINE].budgets
    writes = []
    for i in range(2):
        before = (await budgets._js.stream_info(f"KV_{RUNS}")).state.last_seq
        status, body = await invoke(client, tok, "math", {"expr": f"{i}+1"}, context={"agent_run_id": run_id})
        assert status == 200, body
        await until(lambda: _none_settling(budgets))  # anything the call left to write, written
        writes.append((await budgets._js.stream_info(f"KV_{RUNS}")).state.last_seq - before)
    assert writes == [1, 1]  # one write per call: its count and its price together
    status, body = await invoke(client, tok, "math", {"expr": "3+1"}, context={"agent_run_id": run_id})
    assert status == 403 and body["error"]["code"] == "run_budget_exceeded", body
    run = await (await client.get(f"/v1/runs/{run_id}", headers=bearer(tok))).json()
    assert run["used"]["calls"] == 2 and run["used"]["cost_1t"] == pytest.approx(2 * PRICE), run

    async def written() -> bool:
        return await _usage_cost(db_pool, run_id) == pytest.approx(2 * PRICE)

    await until(written)
    assert await written()


async def test_the_metered_part_is_added_when_the_tool_answers_and_no_answer_costs_nothing(
        client, token, team, db_pool) -> None:
    """A metered tool's run pays its price with its count and the metered part when it
    answers; a call that times out (it ran: counted) gives its price back, as usage charges
    it nothing. The run's cost equals what usage recorded."""
    await grant(client, token, team, "tool.testsvc.metered.invoke")
    tok = token(agent="metered", team=team)
    run_id = await _run(client, tok)
    status, body = await invoke(client, tok, "testsvc.metered", {"tokens": 10}, context={"agent_run_id": run_id})
    assert status == 200 and body["cost_1t"] == pytest.approx(0.5 + 10 * 0.01 + 0.25 * 2.0), body
    status, body = await invoke(client, tok, "testsvc.slow", {"seconds": 2}, context={"agent_run_id": run_id})
    assert status == 504 and body["error"]["code"] == "timeout", body
    budgets = client.app[appkeys.PIPELINE].budgets

    async def settled() -> bool:
        rows = await db_pool.fetchval("SELECT count(*) FROM usage_records WHERE agent_run_id = $1", run_id)
        return rows == 2 and await _none_settling(budgets)

    await until(settled)
    run = await (await client.get(f"/v1/runs/{run_id}", headers=bearer(tok))).json()
    assert run["used"]["calls"] == 2 and run["used"]["tokens"] == 10, run
    assert run["used"]["cost_1t"] == pytest.approx(await _usage_cost(db_pool, run_id)) == pytest.approx(1.1), run
