"""A run's budget counts exactly the calls that ran, when a client disconnects mid-admission."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from proxy.web import keys as appkeys
from proxy.web.admin import keys as admin_keys
from tests.support.calls import bearer, invoke

MAX_CALLS = 3


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


async def _until(probe: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await probe() and loop.time() < deadline:
        await asyncio.sleep(0.05)


async def _budget_matches_the_calls(client, tok: str, run_id: str, db_pool) -> None:
    """The run's counter against its calls on record: the two that completed, the one cancelled
    before it reached its tool; then a third call still fits (max_calls 3)."""
    async def settled() -> bool:
        r = await client.get(f"/v1/runs/{run_id}", headers=bearer(tok))
        run = await r.json()
        rows = await db_pool.fetch("SELECT status, started_at FROM calls WHERE agent_run_id = $1", run_id)
        return run["used"]["calls"] == 2 and len(rows) == 3

    await _until(settled)
    r = await client.get(f"/v1/runs/{run_id}", headers=bearer(tok))
    run = await r.json()
    rows = await db_pool.fetch("SELECT status, started_at FROM calls WHERE agent_run_id = $1", run_id)
    ran = [row for row in rows if row["started_at"] is not None]
    assert run["used"]["calls"] == len(ran) == 2
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

    await _until(recorded, timeout=5.0)
    monkeypatch.setattr(store, "_apply", real_apply)
    go.set()
    await _budget_matches_the_calls(client, tok, run_id, db_pool)
